package jobraft_test

import (
	"context"
	"errors"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// A submit whose context ends after a cut-off leader appended its entry
// (so the entry may still commit, as far as the caller can know) must
// report ErrMayExist, never ErrNotSubmitted ("it does not exist and never
// will"), with the job's ID in its *SubmitError. Resubmitting that ID after
// the partition heals finds at most one job.
func TestSubmitContextEndsAfterAppendIsMayExist(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		patientLeader(cfg)
	})
	l := c.WaitLeader(wait)
	before := c.Ctls[l].Node().Status().LastIndex

	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Ctls[l].Submit(sctx, jobraft.SubmitRequest{ID: "maybe", Queue: "m", Kind: "k"})
		done <- err
	}()
	clustertest.WaitFor(t, wait, "the cut-off leader to append the submit", func() bool {
		return c.Ctls[l].Node().Status().LastIndex > before
	})
	cancel()
	err := <-done
	if errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, jobraft.ErrMayExist) {
		t.Fatalf("submit whose context ended after its entry was appended: %v; want ErrMayExist only", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("submit: %v: want the context's error as the cause", err)
	}
	var se *jobraft.SubmitError
	if !errors.As(err, &se) || se.ID != "maybe" || se.Class != jobraft.ErrMayExist {
		t.Fatalf("submit error %#v", se)
	}

	fn.Heal()
	ctx := clustertest.Ctx(t, wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: se.ID, Queue: "m", Kind: "k"})
	if err != nil || j.ID != "maybe" {
		t.Fatalf("resubmit: %+v %v", j, err)
	}
	p, err := c.Ctls[l].List(ctx, jobraft.ListFilter{Queue: "m"}, jobraft.Page{})
	if err != nil || len(p.Jobs) != 1 {
		t.Fatalf("queue holds %d jobs (%v), want 1", len(p.Jobs), err)
	}
}

// After an attempt with an unknown outcome, a submit whose idempotency key
// names a job that existed before the call (under another ID) is still
// reported a duplicate: only the call's own ID is ambiguous.
func TestSubmitDuplicateByKeyAfterUnknownAttempt(t *testing.T) {
	s := seed(t)
	fn := faultnet.New(s)
	c := clustertest.StartCtlsWithFaults(t, 3, fn, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 2*wait)
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
	clustertest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
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

// startSlowFollower starts three members whose m2 has slowTimer timers: it
// never leads first, and its Submit pauses HeartbeatTimeout/10 (3 s)
// between attempts, a window a test can end a context in. It returns the
// cluster and the leader.
func startSlowFollower(t *testing.T, fn *faultnet.Network) (*clustertest.CtlCluster, int) {
	t.Helper()
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		if i == 2 {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = slowTimer, slowTimer
		}
	})
	l := c.WaitLeader(wait)
	if l == 2 {
		t.Fatalf("m2 (election timeout %v) led first", slowTimer)
	}
	clustertest.WaitFor(t, wait, "m2 to follow the leader", func() bool {
		return c.Ctls[2].LocalStats().Leader == c.Cfgs[l].ID
	})
	return c, l
}

// slowTimer is m2's heartbeat and election timeout in startSlowFollower.
const slowTimer = 30 * time.Second

// A submit whose first attempt ended indeterminate (the leader applied the
// job, its answer to the forwarding follower was lost) and whose retry
// finds the job under the call's own ID reports it created by this call
// (Duplicate false), not a job that existed before.
func TestSubmitRetryFindingItsOwnUnknownAttemptIsNotADuplicate(t *testing.T) {
	fn := faultnet.New(seed(t))
	c, l := startSlowFollower(t, fn)
	from, to := hraft.ServerAddress(c.Cfgs[2].BindAddr), hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.LoseCallResponses(from, to, "jr.propose", 1)
	lost := fn.StatsFrom(from)[faultnet.KindCall].Lost
	entries := c.Ctls[2].LocalStats().SubmitEntries
	ctx := clustertest.Ctx(t, 2*wait)
	j, err := c.Ctls[2].Submit(ctx, jobraft.SubmitRequest{ID: "own", Queue: "u", Kind: "k"})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if got := fn.StatsFrom(from)[faultnet.KindCall].Lost - lost; got != 1 {
		t.Fatalf("%d forwarded answers lost, want 1: the first attempt was not indeterminate", got)
	}
	// The unknown attempt and at least one retry; on a loaded machine a
	// retry can itself end unknown (its forward timed out in a stall, the
	// leader changed) and be retried again. What the test names is below:
	// whatever the attempts, the job is this call's and exists once.
	if got := c.Ctls[2].LocalStats().SubmitEntries - entries; got < 2 {
		t.Fatalf("%d submit attempts, want at least 2 (the unknown one and the retry that found the job)", got)
	}
	if j.ID != "own" || j.Duplicate {
		t.Fatalf("submit returned job %q duplicate=%v; want %q created by this call (duplicate=false)", j.ID, j.Duplicate, "own")
	}
	p, err := c.Ctls[l].List(ctx, jobraft.ListFilter{Queue: "u"}, jobraft.Page{})
	if err != nil || len(p.Jobs) != 1 {
		t.Fatalf("queue holds %d jobs (%v), want 1", len(p.Jobs), err)
	}
}

// A submit whose attempt ended indeterminate (applied on the leader, the
// answer lost) and whose context then ends while it waits to retry
// reports ErrMayExist, never ErrNotSubmitted: the ended attempt's outcome
// is unknown, and so the job may exist (it does).
func TestSubmitContextEndsAfterAnUnknownAttemptIsMayExist(t *testing.T) {
	fn := faultnet.New(seed(t))
	c, l := startSlowFollower(t, fn)
	from, to := hraft.ServerAddress(c.Cfgs[2].BindAddr), hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.LoseCallResponses(from, to, "jr.propose", 1)
	lost := fn.StatsFrom(from)[faultnet.KindCall].Lost
	entries := c.Ctls[2].LocalStats().SubmitEntries
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Ctls[2].Submit(sctx, jobraft.SubmitRequest{ID: "unknown", Queue: "u", Kind: "k"})
		done <- err
	}()
	// The attempt ended (its answer lost) and the job reached m2's state:
	// the submit now waits its retry pause (3 s) with nothing in flight.
	clustertest.WaitFor(t, wait, "the first attempt's answer to be lost and the job to reach m2", func() bool {
		if fn.StatsFrom(from)[faultnet.KindCall].Lost == lost {
			return false
		}
		_, err := c.Ctls[2].Get(context.Background(), "unknown", jobraft.Local)
		return err == nil
	})
	cancel()
	err := <-done
	if got := c.Ctls[2].LocalStats().SubmitEntries - entries; got != 1 {
		t.Fatalf("%d submit attempts when the context ended, want 1: the retry pause (%v) ran out first, the run tests nothing", got, slowTimer/10)
	}
	if errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, jobraft.ErrMayExist) {
		t.Fatalf("submit whose context ended after an indeterminate attempt: %v; want ErrMayExist only", err)
	}
	var se *jobraft.SubmitError
	if !errors.As(err, &se) || se.ID != "unknown" || se.Class != jobraft.ErrMayExist || !errors.Is(err, context.Canceled) {
		t.Fatalf("submit error %v (%#v): want ErrMayExist for %q caused by the context", err, se, "unknown")
	}
	ctx := clustertest.Ctx(t, wait)
	if _, err := c.Ctls[l].Get(ctx, "unknown", jobraft.Linearizable); err != nil {
		t.Fatalf("the job of the unknown attempt: %v (it was applied on the leader)", err)
	}
}
