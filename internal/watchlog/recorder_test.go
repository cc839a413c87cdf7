package watchlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// An entry's events are made into one slice of their number: a batch of a
// claim and acks records claimed and acked events, in command order, in a
// slice not grown while the batch's results were turned into events.
func TestRecorderBatchEventsInOneSlice(t *testing.T) {
	r := New(100, 1<<20)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(index uint64, c fsm.Command) fsm.Result {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		res, err := fsm.DecodeResult(r.Apply(raft.Entry{Index: index, Term: 1, Time: at, Cmd: b}))
		if err != nil || res.Err() != nil {
			t.Fatalf("entry %d: %v %v", index, err, res.Err())
		}
		return res
	}
	var jobs []fsm.NewJob
	for i := range 3 {
		jobs = append(jobs, fsm.NewJob{ID: fmt.Sprint("j", i), Queue: "q", Kind: "k"})
	}
	apply(1, &fsm.SubmitCmd{Jobs: jobs})
	claimed := apply(2, &fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Minute})
	batch := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute}}}
	for _, j := range claimed.Jobs {
		batch.Cmds = append(batch.Cmds, &fsm.AckCmd{ID: j.ID, Token: j.Lease.Token})
	}
	apply(3, batch)
	r.Since(3, 1) // recorded undecoded (no fence): turned into events when read
	ent := r.ring[len(r.ring)-1]
	var got []string
	for _, ev := range ent.events {
		got = append(got, fmt.Sprint(ev.Kind, " ", ev.JobID))
	}
	want := fmt.Sprint([]string{fmt.Sprint(EventClaimed, " j2"), fmt.Sprint(EventAcked, " j0"), fmt.Sprint(EventAcked, " j1")})
	if ent.index != 3 || fmt.Sprint(got) != want {
		t.Fatalf("entry %d events %v, want %v", ent.index, got, want)
	}
	if cap(ent.events) != len(ent.events) {
		t.Fatalf("%d events in a slice of %d", len(ent.events), cap(ent.events))
	}
}

// A batch of lease commands is recorded undecoded unless it touches a job a
// fence waits on, and then decoded at once: either way a watcher reads the
// same events, claimers are woken exactly by a nak that put a job back, a
// fence on a job the batch ends is ended as it applies, and LeaseEnd finds
// the end of a lease in an undecoded batch (a fence set after it applied).
func TestRecorderBatchUndecodedUnlessFenced(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// plain has no fence; elsewhere one on a job no batch touches; fenced
	// one on j0, which every batch here but the naks touches.
	plain, elsewhere, fenced := New(100, 1<<20), New(100, 1<<20), New(100, 1<<20)
	defer elsewhere.Fence("other", 1, func(Event) {})()
	var j0Ends []Event
	defer fenced.Fence("j0", 1, func(ev Event) { j0Ends = append(j0Ends, ev) })()
	recs := []*Recorder{plain, elsewhere, fenced}
	var index uint64
	apply := func(c fsm.Command) (woke [3]bool, undecoded [3]bool) {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		for i, r := range recs {
			w := r.WaitClaim([]string{"q"}, nil, 100)
			res, err := fsm.DecodeResult(r.Apply(raft.Entry{Index: index, Term: 1, Time: at, Cmd: b}))
			if err != nil || res.Err() != nil {
				t.Fatalf("entry %d: %v %v", index, err, res.Err())
			}
			select {
			case <-w.Woken():
				woke[i] = true
			default:
			}
			r.Withdraw(w)
			last := r.ring[len(r.ring)-1]
			undecoded[i] = last.index == index && last.raw != nil
		}
		return woke, undecoded
	}
	var jobs []fsm.NewJob
	for i := range 4 {
		jobs = append(jobs, fsm.NewJob{ID: fmt.Sprint("j", i), Queue: "q", Kind: "k"})
	}
	apply(&fsm.SubmitCmd{Jobs: jobs})
	claim := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 4, TTL: time.Minute}}}
	woke, undecoded := apply(claim)
	if woke != [3]bool{} {
		t.Fatalf("a batch of a claim woke claimers: %v", woke)
	}
	if undecoded != [3]bool{true, true, false} {
		t.Fatalf("claim batch undecoded (no fence, a fence elsewhere, a fence on a claimed job): %v", undecoded)
	}
	if len(j0Ends) != 1 || j0Ends[0].Kind != EventClaimed {
		t.Fatalf("the fence on j0 (another token) ended by %v, want once by its claim", j0Ends)
	}
	claimIndex := index
	evs, _, _, _, _ := plain.Since(claimIndex, 1)
	tok := map[string]uint64{}
	for _, ev := range evs {
		tok[ev.JobID] = ev.Token
	}
	if len(tok) != 4 {
		t.Fatalf("claimed events %v, want 4 jobs", evs)
	}
	var j3Ends []Event
	defer plain.Fence("j3", tok["j3"], func(ev Event) { j3Ends = append(j3Ends, ev) })()
	ack := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.AckCmd{ID: "j0", Token: tok["j0"]}, &fsm.ExtendCmd{ID: "j1", Token: tok["j1"], TTL: time.Minute}}}
	if woke, undecoded := apply(ack); woke != [3]bool{} || undecoded != [3]bool{true, true, false} {
		t.Fatalf("a batch of an ack and an extend: woke %v, undecoded %v", woke, undecoded)
	}
	nak := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.TermCmd{ID: "j2", Token: tok["j2"]}, &fsm.NakCmd{ID: "j1", Token: tok["j1"]}}}
	if woke, undecoded := apply(nak); woke != [3]bool{true, true, true} || undecoded != [3]bool{true, true, true} {
		t.Fatalf("a batch with a nak: woke %v (want all), undecoded %v (want all)", woke, undecoded)
	}
	if woke, _ := apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.NakCmd{ID: "j1", Token: tok["j1"]}}}); woke != [3]bool{} {
		t.Fatalf("a repeated nak woke claimers: %v", woke)
	}
	if len(j3Ends) != 0 {
		t.Fatalf("the fence on j3 ended by %v before its lease ended", j3Ends)
	}
	if _, undecoded := apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.TermCmd{ID: "j3", Token: tok["j3"]}}}); undecoded[0] {
		t.Fatal("a batch ending a fenced lease was recorded undecoded")
	}
	if len(j3Ends) != 1 || j3Ends[0].Kind != EventTermed || j3Ends[0].Index != index {
		t.Fatalf("the fence on j3 ended by %v, want once by the term at %d", j3Ends, index)
	}
	// LeaseEnd reads the undecoded batches after the claim; a nak's or
	// term's end carries its request sum (what tells it from another).
	sums := map[string]uint64{"j1": fsm.NakCmd{}.Sum(), "j2": fsm.TermCmd{}.Sum(), "j3": fsm.TermCmd{}.Sum()}
	for id, want := range map[string]EventKind{"j0": EventAcked, "j1": EventNaked, "j2": EventTermed, "j3": EventTermed} {
		for i, r := range recs {
			if kind, sum, ok := r.LeaseEnd(id, tok[id]); !ok || kind != want || sum != sums[id] {
				t.Errorf("recorder %d: leaseEnd(%s) = %s, sum %x, %v; want %s, sum %x", i, id, kind, sum, ok, want, sums[id])
			}
		}
	}
	all := make([]string, len(recs))
	for i, r := range recs {
		evs, _, _, _, _ := r.Since(1, 100)
		all[i] = fmt.Sprint(evs)
		if len(evs) != 4+4+2+2+1 {
			t.Fatalf("recorder %d: %d events, want 13", i, len(evs))
		}
	}
	if all[0] != all[1] || all[0] != all[2] {
		t.Fatalf("events differ:\nno fence %s\nelsewhere %s\nfenced %s", all[0], all[1], all[2])
	}
}

// BenchmarkRecorderCycle applies full job cycles (a submit of 64 jobs, a
// batch claiming them, a batch acking them) through the recorder, as every
// member does, per job cycle: without a fence (batches recorded
// undecoded), with one on a job no batch touches (undecoded after a look
// at the batch's job IDs), and with one on a job of every batch (decoded
// into events at once, as every batch was before).
func BenchmarkRecorderCycle(b *testing.B) {
	for _, fences := range []string{"none", "elsewhere", "touched"} {
		b.Run("fences="+fences, func(b *testing.B) {
			r := New(4096, 64<<20)
			if fences == "elsewhere" {
				defer r.Fence("other", 1, func(Event) {})()
			}
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			var index uint64
			apply := func(c fsm.Command) []byte {
				cmd, err := fsm.EncodeCommand(c)
				if err != nil {
					b.Fatal(err)
				}
				index++
				return r.Apply(raft.Entry{Index: index, Term: 1, Time: at, Cmd: cmd})
			}
			payload := make([]byte, 256)
			const n = 64
			jobs := make([]fsm.NewJob, n)
			b.ReportAllocs()
			b.ResetTimer()
			for k := 0; k < b.N; k += n {
				for i := range jobs {
					jobs[i] = fsm.NewJob{ID: fmt.Sprint("j", k+i), Queue: "q", Kind: "k", Payload: payload}
				}
				apply(&fsm.SubmitCmd{Jobs: jobs})
				unfence := func() {}
				if fences == "touched" {
					unfence = r.Fence(jobs[n-1].ID, 1, func(Event) {})
				}
				claim := &fsm.BatchCmd{}
				for range n {
					claim.Cmds = append(claim.Cmds, &fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute})
				}
				res, err := fsm.DecodeResult(apply(claim))
				if err != nil {
					b.Fatal(err)
				}
				ack := &fsm.BatchCmd{}
				for _, sr := range res.Batch {
					for _, j := range sr.Jobs {
						ack.Cmds = append(ack.Cmds, &fsm.AckCmd{ID: j.ID, Token: j.Lease.Token})
					}
				}
				if len(ack.Cmds) != n {
					b.Fatalf("claimed %d of %d", len(ack.Cmds), n)
				}
				apply(ack)
				unfence()
			}
		})
	}
}
