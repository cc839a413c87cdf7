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
