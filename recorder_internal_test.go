package jobraft

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// An entry's events are made into one slice of their number: a batch of a
// claim and acks records claimed and acked events, in command order, in a
// slice not grown while the batch's results were turned into events.
func TestRecorderBatchEventsInOneSlice(t *testing.T) {
	r := newRecorder(100, 1<<20)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(index uint64, c fsm.Command) fsm.Result {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		res, err := fsm.DecodeResult(r.Apply(fsm.Entry{Index: index, Term: 1, Time: at, Cmd: b}))
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
	r.since(3, 1) // recorded undecoded (no fence): turned into events when read
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

// A batch of lease commands is recorded undecoded while no fence waits, and
// decoded when set: either way a watcher reads the same events, claimers are
// woken exactly by a nak that put a job back, and leaseEnd finds the end of
// a lease in an undecoded batch (a fence set after it was applied).
func TestRecorderBatchUndecodedUnlessFenced(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plain, fenced := newRecorder(100, 1<<20), newRecorder(100, 1<<20)
	defer fenced.fence("other", &fence{token: 1, end: func(Event) {}})()
	var index uint64
	apply := func(c fsm.Command) (woke [2]bool) {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		for i, r := range []*recorder{plain, fenced} {
			ready := r.readyCh()
			res, err := fsm.DecodeResult(r.Apply(fsm.Entry{Index: index, Term: 1, Time: at, Cmd: b}))
			if err != nil || res.Err() != nil {
				t.Fatalf("entry %d: %v %v", index, err, res.Err())
			}
			select {
			case <-ready:
				woke[i] = true
			default:
			}
		}
		return woke
	}
	var jobs []fsm.NewJob
	for i := range 4 {
		jobs = append(jobs, fsm.NewJob{ID: fmt.Sprint("j", i), Queue: "q", Kind: "k"})
	}
	apply(&fsm.SubmitCmd{Jobs: jobs})
	claim := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 4, TTL: time.Minute}}}
	if woke := apply(claim); woke != [2]bool{} {
		t.Fatalf("a batch of a claim woke claimers: %v", woke)
	}
	claimIndex := index
	raw := plain.ring[len(plain.ring)-1].raw != nil
	if !raw || fenced.ring[len(fenced.ring)-1].raw != nil {
		t.Fatalf("claim batch undecoded: %v without a fence, %v with one; want true, false", raw, fenced.ring[len(fenced.ring)-1].raw != nil)
	}
	evs, _, _, _, _ := plain.since(claimIndex, 1)
	tok := map[string]uint64{}
	for _, ev := range evs {
		tok[ev.JobID] = ev.Token
	}
	if len(tok) != 4 {
		t.Fatalf("claimed events %v, want 4 jobs", evs)
	}
	ack := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.AckCmd{ID: "j0", Token: tok["j0"]}, &fsm.ExtendCmd{ID: "j1", Token: tok["j1"], TTL: time.Minute}}}
	if woke := apply(ack); woke != [2]bool{} {
		t.Fatalf("a batch of an ack and an extend woke claimers: %v", woke)
	}
	nak := &fsm.BatchCmd{Cmds: []fsm.Command{&fsm.TermCmd{ID: "j2", Token: tok["j2"]}, &fsm.NakCmd{ID: "j1", Token: tok["j1"]}}}
	if woke := apply(nak); woke != [2]bool{true, true} {
		t.Fatalf("a batch with a nak woke claimers: %v, want both", woke)
	}
	if woke := apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.NakCmd{ID: "j1", Token: tok["j1"]}}}); woke != [2]bool{} {
		t.Fatalf("a repeated nak woke claimers: %v", woke)
	}
	// leaseEnd reads the undecoded batches after the claim.
	for id, want := range map[string]EventKind{"j0": EventAcked, "j1": EventNaked, "j2": EventTermed} {
		for i, r := range []*recorder{plain, fenced} {
			if kind, ok := r.leaseEnd(id, tok[id]); !ok || kind != want {
				t.Errorf("recorder %d: leaseEnd(%s) = %s, %v; want %s", i, id, kind, ok, want)
			}
		}
	}
	if _, ok := plain.leaseEnd("j3", tok["j3"]); ok {
		t.Error("leaseEnd found an end of a lease that is still held")
	}
	a, _, _, _, _ := plain.since(1, 100)
	b, _, _, _, _ := fenced.since(1, 100)
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 4+4+2+2 {
		t.Fatalf("events without a fence %v\nwith one %v", a, b)
	}
}

// BenchmarkRecorderCycle applies full job cycles (a submit of 64 jobs, a
// batch claiming them, a batch acking them) through the recorder, as every
// member does, per job cycle: without a fence (batches recorded undecoded)
// and with one set on an unrelated job (each batch decoded into events at
// once, as before).
func BenchmarkRecorderCycle(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) {
			r := newRecorder(4096, 64<<20)
			if fenced {
				defer r.fence("other", &fence{token: 1, end: func(Event) {}})()
			}
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			var index uint64
			apply := func(c fsm.Command) []byte {
				cmd, err := fsm.EncodeCommand(c)
				if err != nil {
					b.Fatal(err)
				}
				index++
				return r.Apply(fsm.Entry{Index: index, Term: 1, Time: at, Cmd: cmd})
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
			}
		})
	}
}
