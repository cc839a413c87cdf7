package jobraft_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/ctltest"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// TestStaleAckNotResolvedAsSuccess: a worker's ack whose first attempt is
// indeterminate (its leader was isolated after appending it) and never
// commits must not be reported as success because, meanwhile, the job was
// canceled, retried (attempts reset), claimed again by another worker and
// acked with the same result: the retry is refused as stale, and the
// resolution by a linearizable read sees "succeeded at attempt 1 with this
// result" although the ack under this token never applied.
func TestStaleAckNotResolvedAsSuccess(t *testing.T) {
	s := seed(t)
	fn := faultnet.New(s)
	c := ctltest.StartWithFaults(t, 3, fn, nil)
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, 2*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "stale", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// The lease outlives the test: the job must leave w1 by the cancel
	// below, not by an expiry that a slow election under load could let
	// happen first (the scenario would then be another one).
	ls, err := c.Ctls[l].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"stale"}, Worker: "w1", LeaseTTL: time.Hour})
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	w1 := ls[0]
	before := c.Ctls[l].Node().Status().LastIndex

	// Isolate the leader and ack on it at once: the ack is appended to its
	// log, never committed; the leader steps down and the attempt's outcome
	// is unknown; the worker keeps retrying while isolated.
	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	ackErr := make(chan error, 1)
	go func() { ackErr <- w1.Ack(ctx, nil) }()
	ctltest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
		return c.Ctls[l].Node().Status().Role != "Leader"
	})
	if after := c.Ctls[l].Node().Status().LastIndex; after <= before {
		t.Fatalf("the ack was not appended on the isolated leader (last index %d → %d): setup failed", before, after)
	}

	// The majority elects a leader; the job is canceled, retried, claimed
	// by another worker and acked with the same (empty) result.
	var n int
	ctltest.WaitFor(t, wait, "a leader among the majority", func() bool {
		for i, ctl := range c.Ctls {
			if i != l && ctl.Node().Status().Role == "Leader" {
				n = i
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				_, err := ctl.Node().LinearizableRead(rctx)
				return err == nil
			}
		}
		return false
	})
	if got, err := c.Ctls[n].Get(ctx, j.ID, jobraft.Linearizable); err != nil || got.Lease == nil || got.Lease.Token != w1.Token {
		t.Fatalf("before the cancel the job is %+v (%v), want running under w1's lease %d", got, err, w1.Token)
	}
	if _, err := c.Ctls[n].Cancel(ctx, j.ID, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctls[n].Retry(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	ls2, err := c.Ctls[n].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"stale"}, Worker: "w2"})
	if err != nil || len(ls2) != 1 {
		t.Fatalf("second claim: %v %v", ls2, err)
	}
	if ls2[0].Job.Attempts != w1.Job.Attempts {
		t.Fatalf("attempts %d vs %d", ls2[0].Job.Attempts, w1.Job.Attempts)
	}
	if err := ls2[0].Ack(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// Heal: the isolated member drops its uncommitted ack; the worker's
	// retry is refused as stale. Its ack never applied: reporting success
	// would accept a fenced ack.
	fn.Rejoin(addr)
	select {
	case err := <-ackErr:
		if err == nil {
			t.Fatal("the fenced worker's ack was reported successful; it never applied (the job succeeded under another lease)")
		}
		if !errors.Is(err, jobraft.ErrStaleLease) && !errors.Is(err, jobraft.ErrOutcomeUnknown) {
			t.Fatalf("ack: %v", err)
		}
		t.Logf("fenced ack: %v", err)
	case <-ctx.Done():
		t.Fatal("the fenced ack did not return")
	}
}

// TestBatchingNeverExceedsMaxCommandSize: with a MaxCommandSize below the
// default BatchMaxBytes, concurrent submits that each fit were batched
// into an entry the node refuses as too large, and every one of them
// failed ErrNotSubmitted.
func TestBatchingNeverExceedsMaxCommandSize(t *testing.T) {
	c := ctltest.Start(t, 3, func(i int, cfg *jobraft.Config) { cfg.MaxCommandSize = 64 << 10 })
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
	const clients = 32
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		go func() {
			_, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "big", Kind: "k", Payload: make([]byte, 8<<10)})
			errs <- err
		}()
	}
	for i := 0; i < clients; i++ {
		if err := <-errs; err != nil {
			t.Errorf("submit of a job that fits MaxCommandSize: %v", err)
		}
	}
}

// Watch racing Close never adds to the controller's WaitGroup after Close
// waited on it: a Watch either starts (and ends with ErrClosed) or is
// refused with ErrClosed.
func TestWatchRacingCloseIsSafe(t *testing.T) {
	ctl := ctltest.Start(t, 1, nil)
	c := ctl.Ctls[0]
	ctl.WaitLeader(wait)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := c.Watch(context.Background(), 0, jobraft.WatchFilter{})
			if err != nil {
				if !errors.Is(err, jobraft.ErrClosed) {
					t.Errorf("watch: %v", err)
				}
				return
			}
			for range ch {
			}
		}()
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// After an attempt with an unknown outcome, a submit whose idempotency key
// names a job that existed before the call (under another ID) is still
// reported a duplicate: only the call's own ID is ambiguous.
func TestSubmitDuplicateByKeyAfterUnknownAttempt(t *testing.T) {
	s := seed(t)
	fn := faultnet.New(s)
	c := ctltest.StartWithFaults(t, 3, fn, nil)
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, 2*wait)
	first, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: "first", Queue: "dup", Kind: "k", IdempotencyKey: "K"})
	if err != nil {
		t.Fatal(err)
	}
	before := c.Ctls[l].Node().Status().LastIndex
	// The leader is isolated and the submit (same key, new ID) goes to it:
	// its entry is appended, never committed; the leader steps down, the
	// attempt is unknown, the controller retries until the partition heals.
	fn.Isolate(hraft.ServerAddress(c.Cfgs[l].BindAddr))
	type res struct {
		r   jobraft.SubmitResult
		err error
	}
	done := make(chan res, 1)
	go func() {
		rs, err := c.Ctls[l].SubmitBatch(ctx, []jobraft.SubmitRequest{{ID: "second", Queue: "dup", Kind: "k", IdempotencyKey: "K"}})
		var r jobraft.SubmitResult
		if len(rs) == 1 {
			r = rs[0]
		}
		done <- res{r, err}
	}()
	ctltest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
		return c.Ctls[l].Node().Status().Role != "Leader"
	})
	if after := c.Ctls[l].Node().Status().LastIndex; after <= before {
		t.Fatalf("the submit was not appended on the isolated leader (last index %d → %d): setup failed", before, after)
	}
	fn.Heal()
	got := <-done
	if got.err != nil || got.r.Err != nil {
		t.Fatalf("submit: %v / %v", got.err, got.r.Err)
	}
	if got.r.Job.ID != first.ID || !got.r.Duplicate {
		t.Fatalf("result job %q duplicate=%v, want the pre-existing %q reported as a duplicate", got.r.Job.ID, got.r.Duplicate, first.ID)
	}
}
