package jobraft_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// TestBatchingNeverExceedsMaxCommandSize: with a MaxCommandSize below the
// default BatchMaxBytes, concurrent submits that each fit were batched
// into an entry the node refuses as too large, and every one of them
// failed ErrNotSubmitted.
func TestBatchingNeverExceedsMaxCommandSize(t *testing.T) {
	c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) { cfg.MaxCommandSize = 64 << 10 })
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
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

// TestHoldGathersClosedLoopSubmitters: 32 clients submitting back to back
// share entries far more with the hold than without it. Without it, the
// first callers back from an answered entry take free in-flight slots alone
// or in small groups, and the stream splits into many small entries; with
// it, the next entry waits for the answered callers. The hold is long here
// (one second) so that on a loaded machine the callers are always back
// before it ends; only the last entries, whose callers are done, wait it
// out.
func TestHoldGathersClosedLoopSubmitters(t *testing.T) {
	const clients, each = 32, 30
	perEntry := func(hold time.Duration) float64 {
		c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) { cfg.BatchHold = hold })
		l := c.WaitLeader(wait)
		ctx := clustertest.Ctx(t, wait)
		before := c.Ctls[l].LocalStats()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < each; j++ {
					if _, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k", Payload: []byte("x")}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("submit: %v", err)
		}
		after := c.Ctls[l].LocalStats()
		jobs, entries := after.SubmittedJobs-before.SubmittedJobs, after.SubmitEntries-before.SubmitEntries
		if jobs != clients*each {
			t.Fatalf("%d jobs submitted, want %d", jobs, clients*each)
		}
		t.Logf("hold %v: %d entries for %d jobs (%.1f per entry), %d holds, %d expired",
			hold, entries, jobs, float64(jobs)/float64(entries), after.BatchHolds-before.BatchHolds, after.BatchHoldsExpired-before.BatchHoldsExpired)
		return float64(jobs) / float64(entries)
	}
	with, without := perEntry(time.Second), perEntry(-1)
	if with < 2*without || with < 12 {
		t.Fatalf("jobs per entry: %.1f with the hold, %.1f without: want at least twice as many, and 12", with, without)
	}
}
