package jobraft_test

import (
	"errors"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/ctltest"
	"github.com/jobraft/jobraft/transport"
)

// An ack whose first attempt applied but whose answer was lost is retried,
// and the retry is refused as stale (the job already succeeded under this
// very lease). A worker that kept only the job ID and token (LeaseOf) gives
// the controller no attempt number to settle that with, so the outcome is
// unknown, and the error must say only that: matching ErrStaleLease as
// well told callers that nothing changed (ctltest answered "stale", jobd
// 409 stale_lease) for an ack that did apply. TestLinearizableUnderLeaderKills
// caught it under load, with a leader killed mid-ack.
func TestUnknownAckIsNotAlsoStale(t *testing.T) {
	fn := transport.NewFaultNetwork(seed(t))
	c := ctltest.Start(t, 3, func(i int, cfg *jobraft.Config) { cfg.Faults = fn })
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	ctx := ctltest.Ctx(t, wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "u", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[l].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"u"}, Worker: "w", LeaseTTL: time.Hour})
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	// The follower forwards the ack to the leader; the first answer is lost.
	fn.LoseCallResponses(hraft.ServerAddress(c.Cfgs[f].BindAddr), hraft.ServerAddress(c.Cfgs[l].BindAddr), "jr.propose", 1)
	err = c.Ctls[f].LeaseOf(jobraft.Job{ID: j.ID}, ls[0].Token).Ack(ctx, []byte("r"))
	got, gerr := c.Ctls[l].Get(ctx, j.ID, jobraft.Linearizable)
	if gerr != nil || got.State != jobraft.StateSucceeded {
		t.Fatalf("the ack did not apply (job %+v, %v): not the scenario", got, gerr)
	}
	if !errors.Is(err, jobraft.ErrOutcomeUnknown) || errors.Is(err, jobraft.ErrStaleLease) {
		t.Fatalf("ack that applied, answer lost, retry refused: %v (unknown %v, stale %v), want an unknown outcome only",
			err, errors.Is(err, jobraft.ErrOutcomeUnknown), errors.Is(err, jobraft.ErrStaleLease))
	}
	t.Logf("ack: %v", err)
}
