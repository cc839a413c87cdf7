package raft_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// A member whose log contradicts the leader's below its commit floor (an
// entry of its old term at an index the others committed in a higher
// term, with its floor over it: what disk damage or a copied data dir
// leaves) is named diverged by the leader's monitor, with the index and
// both terms (Status.Progress, EventMemberDiverged); removed and added
// again it is never promoted: AddMember returns ErrMemberDiverged and it
// stays a non-voter whose log is not repaired in place.
func TestDivergedMemberIsNamedAndNeverPromoted(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 10)
	c.WaitConverged(wait)
	d := (l + 1) % 3
	dID := c.Cfgs[d].ID
	before := c.Nodes[d].Status()
	n, oldTerm := before.LastIndex, before.LastTerm
	c.StopMember(d)
	clustertest.WaitFor(t, wait, "a leader in a higher term", func() bool {
		if l = c.Leader(); l < 0 {
			return false
		}
		if c.Nodes[l].Status().Term > oldTerm {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Nodes[l].TransferLeadership(ctx, c.Cfgs[3-l-d].ID); err != nil {
			t.Logf("leadership transfer (retried): %v", err)
		}
		return false
	})
	events, cancelEvents := c.Nodes[l].Events(1024)
	defer cancelEvents()
	proposeN(t, c, l, "b", 5)
	writeGhost(t, filepath.Join(c.Cfgs[d].DataDir, "log"), n+1, oldTerm)
	c.StartMember(d)

	var p raft.MemberProgress
	clustertest.WaitFor(t, wait, "the leader to name the member diverged", func() bool {
		var ok bool
		p, ok = progressOf(c.Nodes[l].Status(), dID)
		return ok && p.State == raft.StateDiverged
	})
	if p.Divergence == nil || p.Divergence.Index != n+1 || p.Divergence.LocalTerm != oldTerm || p.Divergence.LeaderTerm <= oldTerm || p.Reason != "diverged" {
		t.Fatalf("leader's progress of the diverged member: %+v (divergence %+v); want index %d, local term %d", p, p.Divergence, n+1, oldTerm)
	}
	t.Logf("named: %s (%s)", p.State, p.Detail)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].RemoveMember(ctx, dID); err != nil {
		t.Fatal(err)
	}
	err := c.Nodes[l].AddMember(ctx, dID, c.Nodes[d].Addr())
	if !errors.Is(err, raft.ErrMemberDiverged) {
		t.Fatalf("AddMember of a diverged member: %v, want ErrMemberDiverged", err)
	}
	for _, m := range c.Nodes[l].Status().Members {
		if m.ID == dID && m.Voter {
			t.Fatal("the diverged member was promoted")
		}
	}
	var ghost hraft.Log
	if err := c.Nodes[d].Log().GetLog(n+1, &ghost); err != nil || ghost.Term != oldTerm {
		t.Fatalf("the diverged member's entry %d: term %d, %v; want its own (term %d), not repaired", n+1, ghost.Term, err, oldTerm)
	}
	seen := false
	clustertest.WaitFor(t, wait, "EventMemberDiverged", func() bool {
		for {
			select {
			case e := <-events:
				switch {
				case e.Kind == raft.EventMemberDiverged && e.Member.ID == dID:
					seen = e.Index == n+1 && errors.Is(e.Err, raft.ErrMemberDiverged)
				case e.Kind == raft.EventMemberPromoted && e.Member.ID == dID:
					t.Fatal("EventMemberPromoted for the diverged member")
				}
			default:
				return seen
			}
		}
	})
	proposeN(t, c, l, fmt.Sprintf("c%d", 0), 3)
}
