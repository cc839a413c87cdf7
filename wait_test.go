package jobraft_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Submit says whether the job existed before the call: by its ID, or by
// its idempotency key under another ID; a new job is not a duplicate.
func TestSubmitReportsDuplicate(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	f := (l + 1) % 3
	first, err := c.Ctls[f].Submit(ctx, jobraft.SubmitRequest{ID: "dup-1", Queue: "d", Kind: "k", IdempotencyKey: "K"})
	if err != nil || first.Duplicate || first.ID != "dup-1" || first.State != jobraft.StatePending {
		t.Fatalf("first submit: %v %+v", err, first)
	}
	again, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: "dup-1", Queue: "d", Kind: "k"})
	if err != nil || !again.Duplicate || again.ID != "dup-1" || again.Seq != first.Seq {
		t.Fatalf("same ID again: %v %+v", err, again)
	}
	byKey, err := c.Ctls[f].Submit(ctx, jobraft.SubmitRequest{ID: "dup-2", Queue: "d", Kind: "k", IdempotencyKey: "K"})
	if err != nil || !byKey.Duplicate || byKey.ID != "dup-1" {
		t.Fatalf("same key, other ID: %v %+v", err, byKey)
	}
	other, err := c.Ctls[f].Submit(ctx, jobraft.SubmitRequest{Queue: "d", Kind: "k"})
	if err != nil || other.Duplicate {
		t.Fatalf("new job: %v %+v", err, other)
	}
}

// Wait returns a job once it finished, whichever member finished it and
// whichever member waits: succeeded with its result, dead with its error,
// canceled; at once for a job already finished. A job that does not exist
// is ErrNotFound; a job that does not finish ends with the context.
func TestWaitReturnsOutcome(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	a, b := (l+1)%3, (l+2)%3
	type outcome struct {
		j   jobraft.Job
		err error
	}
	waitOn := func(i int, id string) <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			j, err := c.Ctls[i].Wait(ctx, id)
			ch <- outcome{j, err}
		}()
		return ch
	}
	ok, err := c.Ctls[a].Submit(ctx, jobraft.SubmitRequest{Queue: "w", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := c.Ctls[a].Submit(ctx, jobraft.SubmitRequest{Queue: "w", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// Waits start on another member before anything happens to the jobs.
	okDone, badDone := waitOn(b, ok.ID), waitOn(l, bad.ID)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.Ctls[l].Run(rctx, jobraft.WorkerConfig{Queues: map[string]int{"w": 2}, Handlers: map[string]jobraft.Handler{
		"k": func(_ context.Context, j jobraft.Job) ([]byte, error) {
			if j.ID == bad.ID {
				return nil, jobraft.Permanent(errors.New("bad input"))
			}
			return []byte("result"), nil
		}}})
	if o := <-okDone; o.err != nil || o.j.State != jobraft.StateSucceeded || string(o.j.Result) != "result" {
		t.Fatalf("wait for the succeeding job: %v %+v", o.err, o.j)
	}
	if o := <-badDone; o.err != nil || o.j.State != jobraft.StateDead || o.j.LastError != "bad input" {
		t.Fatalf("wait for the failing job: %v %+v", o.err, o.j)
	}
	// Already finished: at once, on any member.
	if j, err := c.Ctls[a].Wait(ctx, ok.ID); err != nil || j.State != jobraft.StateSucceeded {
		t.Fatalf("wait for a finished job: %v %+v", err, j)
	}
	// Canceled while waited on.
	cj, err := c.Ctls[a].Submit(ctx, jobraft.SubmitRequest{Queue: "idle", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	cDone := waitOn(b, cj.ID)
	if _, err := c.Ctls[l].Cancel(ctx, cj.ID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if o := <-cDone; o.err != nil || o.j.State != jobraft.StateCanceled {
		t.Fatalf("wait for a canceled job: %v %+v", o.err, o.j)
	}
	if _, err := c.Ctls[b].Wait(ctx, "no-such-job"); !errors.Is(err, jobraft.ErrNotFound) {
		t.Fatalf("wait for a job that does not exist: %v", err)
	}
	pending, err := c.Ctls[a].Submit(ctx, jobraft.SubmitRequest{Queue: "idle", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if j, err := c.Ctls[b].Wait(short, pending.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a job that never finishes: %v %+v", err, j)
	}
}
