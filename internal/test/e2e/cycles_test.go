package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A claim that finds nothing claimable writes nothing to the log: without
// Wait on the leader and on a follower, with Wait on an idle queue, and on
// a queue whose only job is scheduled in the future.
func TestIdleClaimWritesNothing(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, wait)
	lead := c.Ctls[l]
	if _, err := lead.Submit(ctx, jobraft.SubmitRequest{Queue: "later", Kind: "k", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// Each member's first read in a term may commit a barrier: take it now.
	for _, i := range []int{l, f} {
		if _, err := c.Ctls[i].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"idle"}, Worker: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	before := clustertest.LastIndex(lead)
	for round := 0; round < 10; round++ {
		for _, i := range []int{l, f} {
			for _, q := range []string{"idle", "later"} {
				ls, err := c.Ctls[i].Claim(ctx, jobraft.ClaimRequest{Queues: []string{q}, Worker: "w"})
				if err != nil || len(ls) != 0 {
					t.Fatalf("member %d queue %s: %d leases, %v", i, q, len(ls), err)
				}
			}
		}
	}
	ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"idle", "later"}, Worker: "w", Wait: 3 * c.Cfgs[f].ClaimPollInterval})
	if err != nil || len(ls) != 0 {
		t.Fatalf("waiting claim: %d leases, %v", len(ls), err)
	}
	// Count commands, not indexes: a leader change under load appends a
	// no-op of its own.
	if n := commandsSince(t, c.Ctls[c.WaitLeader(wait)], before); n != 0 {
		t.Fatalf("idle claims wrote %d commands to the log", n)
	}
}

// commandsSince counts the command entries of ctl's log after index from.
func commandsSince(t *testing.T, ctl *jobraft.Controller, from uint64) int {
	t.Helper()
	log := ctl.Node().Log()
	last, err := log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := from + 1; i <= last; i++ {
		var e hraft.Log
		if err := log.GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == hraft.LogCommand {
			n++
		}
	}
	return n
}

// A claim without Wait on a follower sees every job committed before it
// began, although the follower may not have applied it yet: it reads
// through the leader before answering empty.
func TestFollowerClaimSeesCommitted(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, wait)
	for i := 0; i < 30; i++ {
		s, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w"})
		if err != nil || len(ls) != 1 || ls[0].Job.ID != s.ID {
			t.Fatalf("round %d: claim on the follower after submit %s: %d leases, %v", i, s.ID, len(ls), err)
		}
		if err := ls[0].Ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A waiting claim on a follower gets a job that becomes due while it waits
// (seen by the poll, not by an apply), before its wait ends.
func TestWaitingClaimSeesDueJob(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, wait)
	s, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k", Delay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w", Wait: wait})
	if err != nil || len(ls) != 1 || ls[0].Job.ID != s.ID {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
}

// cycles runs n full job cycles (submit, claim, ack) over clients
// closed-loop clients on member ctl, each on its own queue, and returns the
// log entries the leader's log grew by per cycle.
func cycles(t testing.TB, ctx context.Context, ctl, leader *jobraft.Controller, clients, n int) float64 {
	before := clustertest.LastIndex(leader)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	per := n / clients
	for cl := 0; cl < clients; cl++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprint("cy", cl)
			for i := 0; i < per; i++ {
				if err := clustertest.Cycle(ctx, ctl, q, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(clustertest.LastIndex(leader)-before) / float64(per*clients)
}

// Full cycles share entries: submits with submits, claims and acks with
// each other, so at 32 concurrent clients the log grows by well under the
// 3 entries a cycle would take alone (the bound is loose: the machine is
// loaded and batches are smaller at this scale than at 64 clients).
func TestCyclesShareEntries(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	per := cycles(t, ctx, c.Ctls[l], c.Ctls[l], 32, 640)
	t.Logf("%.2f entries per cycle", per)
	if per > 2.0 {
		t.Fatalf("%.2f log entries per full job cycle at 32 clients, want at most 2", per)
	}
}

// TestHoldSharesCycleRounds: with the hold, the submits, claims and acks
// of 32 clients cycling back to back gather into far fewer entries than
// without it: a submit's caller comes back with a claim, a claim's with an
// ack, and the member's two batchers hold together. The hold is long here
// (one second) so that on a loaded machine the callers are back before it
// ends.
func TestHoldSharesCycleRounds(t *testing.T) {
	perCycle := func(hold time.Duration) float64 {
		c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) { cfg.BatchHold = hold })
		l := c.WaitLeader(wait)
		ctx := clustertest.Ctx(t, wait)
		before := c.Ctls[l].LocalStats()
		per := cycles(t, ctx, c.Ctls[l], c.Ctls[l], 32, 640)
		after := c.Ctls[l].LocalStats()
		t.Logf("hold %v: %.2f entries per cycle, %d holds, %d expired", hold, per,
			after.BatchHolds-before.BatchHolds, after.BatchHoldsExpired-before.BatchHoldsExpired)
		return per
	}
	with, without := perCycle(time.Second), perCycle(-1)
	if with > without/2 {
		t.Fatalf("%.2f entries per cycle with the hold, %.2f without: want at most half", with, without)
	}
}

// Run claims as many jobs per claim as it has free slots: with 8 slots
// free and 8 jobs ready, one claim entry leases them all.
func TestRunClaimsFreeSlotsAtOnce(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	lead := c.Ctls[l]
	reqs := make([]jobraft.SubmitRequest, 8)
	for i := range reqs {
		reqs[i] = jobraft.SubmitRequest{Queue: "slots", Kind: "k"}
	}
	if _, err := lead.SubmitBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	evs, err := lead.Watch(ctx, 0, jobraft.WatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- lead.Run(rctx, jobraft.WorkerConfig{Queues: map[string]int{"slots": 8}, Default: func(hctx context.Context, _ jobraft.Job) ([]byte, error) {
			select { // hold every slot until all 8 are claimed
			case <-release:
			case <-hctx.Done():
			}
			return nil, nil
		}})
	}()
	tokens := map[uint64]int{}
	for claimed := 0; claimed < 8; {
		select {
		case ev := <-evs:
			if ev.Kind == jobraft.EventClaimed {
				tokens[ev.Token]++
				claimed++
			}
		case <-ctx.Done():
			t.Fatalf("claimed %d of 8", claimed)
		}
	}
	close(release)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 {
		t.Fatalf("8 jobs claimed by %d claim entries (%v), want 1", len(tokens), tokens)
	}
}
