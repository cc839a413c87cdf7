package jobraft_test

import (
	"errors"
	"math"
	"testing"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A queue's concurrency limit, set on a follower, holds across claims
// made on every member and after the leader is stopped; bad limits are
// refused and change nothing; Stats counts the claims held back.
func TestLimitHoldsAcrossMembersAndFailover(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	ctx := clustertest.Ctx(t, wait)
	for _, bad := range []error{
		c.Ctls[f].SetLimit(ctx, "q", "", 0),
		c.Ctls[f].SetLimit(ctx, "", "", 1),
		c.Ctls[f].SetRate(ctx, "q", jobraft.RateLimit{PerSecond: -1}),
		c.Ctls[f].SetRate(ctx, "q", jobraft.RateLimit{PerSecond: math.NaN()}),
		c.Ctls[f].SetRate(ctx, "q", jobraft.RateLimit{PerSecond: 1, Burst: -1}),
	} {
		if !errors.Is(bad, jobraft.ErrInvalidRequest) {
			t.Fatalf("bad limit: %v, want ErrInvalidRequest", bad)
		}
	}
	if ls, err := c.Ctls[l].Limits(ctx, jobraft.Linearizable); err != nil || len(ls) != 0 {
		t.Fatalf("refused limits left %+v (%v)", ls, err)
	}
	if err := c.Ctls[f].SetLimit(ctx, "q", "", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := c.Ctls[i%3].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	var held []*jobraft.Lease
	for i := range 3 {
		ls, err := c.Ctls[i].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w", Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls...)
	}
	if len(held) != 2 {
		t.Fatalf("members leased %d jobs under a limit of 2", len(held))
	}
	c.StopMember(l)
	l2 := c.WaitLeader(wait)
	other := 3 - l - l2
	for _, m := range []int{l2, other} {
		if ls, err := c.Ctls[m].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w2", Max: 5}); err != nil || len(ls) != 0 {
			t.Fatalf("after failover m%d leased %d (%v)", m, len(ls), err)
		}
	}
	if err := c.Ctls[other].LeaseOf(held[0].Job, held[0].Token).Ack(ctx, nil); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[other].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w2", Max: 5})
	if err != nil || len(ls) != 1 {
		t.Fatalf("after an ack leased %d (%v), want 1", len(ls), err)
	}
	st, err := c.Ctls[l2].Stats(ctx)
	if err != nil || len(st.Limits) != 1 || st.Limits[0].Max != 2 || st.Limits[0].Running != 2 {
		t.Fatalf("stats limits %+v (%v)", st.Limits, err)
	}
	if err := c.Ctls[other].ClearLimit(ctx, "q", ""); err != nil {
		t.Fatal(err)
	}
	if ls, err := c.Ctls[l2].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"q"}, Worker: "w3", Max: 5}); err != nil || len(ls) != 3 {
		t.Fatalf("without the limit leased %d (%v), want the 3 pending", len(ls), err)
	}
}

// A unique submit whose key a job holds returns that job as a duplicate,
// on any member; bad unique options are refused.
func TestUniqueSubmit(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	u := &jobraft.UniqueOpts{}
	first, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u})
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := c.Ctls[(l+1)%3].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u})
	if err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("second: %+v %v, want a duplicate of %s", again, err, first.ID)
	}
	_, err = c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k", Unique: &jobraft.UniqueOpts{States: 1}})
	if !errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, fsm.ErrInvalidCommand) {
		t.Fatalf("bad unique states: %v", err)
	}
}
