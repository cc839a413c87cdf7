package watchlog

import (
	"bytes"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A Finished wait is woken exactly by the entry that leaves its job
// terminal, batches of lease commands included (recorded undecoded all the
// same: the state a batch leaves a job in is read without decoding it):
// not by its claim, not by a nak that schedules it
// again, not by another job's cancel; by the ack that makes it succeeded,
// and by a term that makes it dead. A stopped wait is not woken.
func TestFinishedWokenByTheFinishingEntry(t *testing.T) {
	r := New(100, 1<<20)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var index uint64
	apply := func(c fsm.Command) fsm.Result {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		res, err := fsm.DecodeResult(r.Apply(raft.Entry{Index: index, Term: 1, Time: at, Cmd: b}))
		if err != nil || res.Err() != nil {
			t.Fatalf("entry %d: %v %v", index, err, res.Err())
		}
		return res
	}
	claim := func() fsm.Job {
		t.Helper()
		res := apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute}}})
		if len(res.Batch) != 1 || len(res.Batch[0].Jobs) != 1 {
			t.Fatalf("claim: %+v", res)
		}
		return res.Batch[0].Jobs[0]
	}
	apply(&fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: "a", Queue: "q", Kind: "k", MaxAttempts: 3}, {ID: "b", Queue: "q", Kind: "k"}, {ID: "c", Queue: "q", Kind: "k"}}})
	aDone, aStop := r.Finished("a")
	defer aStop()
	cDone, cStop := r.Finished("c")
	defer cStop()
	stopped, stop := r.Finished("b")
	stop()

	a := claim()
	if a.ID != "a" || closed(aDone) {
		t.Fatalf("claimed %s; a's wait woken by its claim: %v", a.ID, closed(aDone))
	}
	apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.NakCmd{ID: "a", Token: a.Lease.Token, Error: "again"}}})
	if closed(aDone) {
		t.Fatal("a's wait woken by a nak that scheduled it again")
	}
	at = at.Add(time.Hour) // a's retry is due
	apply(&fsm.CancelCmd{ID: "b"})
	if closed(aDone) || closed(stopped) {
		t.Fatalf("after b's cancel: a's wait woken %v, b's stopped wait woken %v", closed(aDone), closed(stopped))
	}
	c := claim() // c's run-at is older than a's retry
	apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.TermCmd{ID: "c", Token: c.Lease.Token, Reason: "no"}}})
	if c.ID != "c" || !closed(cDone) || closed(aDone) {
		t.Fatalf("claimed %s; after c's term: c's wait woken %v, a's %v", c.ID, closed(cDone), closed(aDone))
	}
	a = claim()
	apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.AckCmd{ID: "a", Token: a.Lease.Token}}})
	if a.ID != "a" || !closed(aDone) {
		t.Fatalf("claimed %s; a's wait not woken by its ack", a.ID)
	}
	if last := r.ring[len(r.ring)-1]; last.raw == nil {
		t.Fatal("the ack batch that finished a waited job was decoded as it applied")
	}
	if len(r.finished) != 0 {
		t.Fatalf("registrations left: %v", r.finished)
	}
	// No wait left: a batch is recorded undecoded.
	apply(&fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: "d", Queue: "q", Kind: "k"}}})
	claim()
	if last := r.ring[len(r.ring)-1]; last.raw == nil {
		t.Fatal("a batch touching no waited job was decoded as it applied")
	}
}

// A restore wakes every Finished wait: the job may have finished in the
// restored state, with no entry applied here to say so.
func TestFinishedWokenByRestore(t *testing.T) {
	src := New(100, 1<<20)
	b, err := fsm.EncodeCommand(&fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: "a", Queue: "q", Kind: "k"}}})
	if err != nil {
		t.Fatal(err)
	}
	src.Apply(raft.Entry{Index: 1, Term: 1, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Cmd: b})
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	r := New(100, 1<<20)
	done, stop := r.Finished("a")
	defer stop()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if !closed(done) || len(r.finished) != 0 {
		t.Fatalf("after a restore: woken %v, registrations %v", closed(done), r.finished)
	}
}
