package raft_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// sendAppend sends one AppendEntries from a bare raft transport (a member
// of no cluster) to the member at target, as if from leader.
func sendAppend(t *testing.T, target string, req *hraft.AppendEntriesRequest) *hraft.AppendEntriesResponse {
	t.Helper()
	nt := bareTransport(t)
	var resp hraft.AppendEntriesResponse
	if err := nt.AppendEntries(hraft.ServerID("crafted"), hraft.ServerAddress(target), req, &resp); err != nil {
		t.Fatalf("crafted append to %s: %v", target, err)
	}
	return &resp
}

// TestCraftedCommitAheadOfVerifiedAppendIsClamped is the regression test
// of docs/upstream.md U1. A deposed leader holding an uncommitted entry N+1
// of its old term is sent, in the new leader's name and term, an append
// with PrevLogEntry N, no entries and the new leader's commit index (> N).
// hashicorp/raft v1.7.3 alone commits and applies the stale N+1; through
// the seam the member's commit and applied indexes never pass N, the stale
// write never reaches its state machine, and after the heal it truncates
// the stale entry and converges with no guard refusal.
func TestCraftedCommitAheadOfVerifiedAppendIsClamped(t *testing.T) {
	faults := faultnet.New(1)
	c := clustertest.StartNodes(t, 3, faults, nil)
	l := c.WaitLeader(wait)
	if _, err := c.Propose(l, "before=1", wait); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(wait)
	old := c.Nodes[l]
	n := old.Status().LastIndex
	var prev hraft.Log
	if err := old.Log().GetLog(n, &prev); err != nil {
		t.Fatal(err)
	}

	// The old leader appends an entry it can never commit.
	faults.Isolate(addr(old))
	if _, err := c.Propose(l, "lost=1", 2*time.Second); err == nil {
		t.Fatal("a proposal on an isolated leader reported success")
	}
	clustertest.WaitFor(t, wait, "the stale entry in the old leader's log", func() bool {
		return old.Status().LastIndex == n+1
	})
	var stale hraft.Log
	if err := old.Log().GetLog(n+1, &stale); err != nil {
		t.Fatal(err)
	}

	// A new leader among the others commits past N.
	var nl int
	clustertest.WaitFor(t, wait, "a leader among the others", func() bool {
		for i, m := range c.Nodes {
			if i != l && m.Status().Role == "Leader" && m.Status().Term > stale.Term {
				nl = i
				return true
			}
		}
		return false
	})
	if _, err := c.Propose(nl, "after=1", wait); err != nil {
		t.Fatal(err)
	}
	leader := c.Nodes[nl].Status()
	if leader.CommitIndex <= n {
		t.Fatalf("new leader commit %d, want > %d", leader.CommitIndex, n)
	}
	events, cancel := old.Events(1024)
	defer cancel()

	// The crafted append, as the new leader would send it.
	resp := sendAppend(t, old.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader:         hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(leader.Address)},
		Term:              leader.Term,
		PrevLogEntry:      n,
		PrevLogTerm:       prev.Term,
		LeaderCommitIndex: leader.CommitIndex,
	})
	if !resp.Success {
		t.Fatalf("crafted append refused (term %d, last %d): the test did not reach the defect's precondition", resp.Term, resp.LastLog)
	}
	// raft sets its commit index before it answers; the applied index can
	// only follow the commit index.
	st := old.Status()
	if st.CommitIndex > n || st.AppliedIndex > n {
		t.Fatalf("old leader at commit %d applied %d after the crafted append, want ≤ %d (its index %d is the stale term-%d entry)",
			st.CommitIndex, st.AppliedIndex, n, n+1, stale.Term)
	}
	if st.Seam.CommitClamps == 0 {
		t.Fatal("the seam reports no clamp for an append whose commit index passed its verified range")
	}
	if _, ok := c.KVs[l].Get("lost"); ok {
		t.Fatal("the never-committed write reached the old leader's state machine")
	}

	faults.Heal()
	c.WaitConverged(wait)
	if _, ok := c.KVs[l].Get("lost"); ok {
		t.Fatal("the never-committed write reached the old leader's state machine")
	}
	for i, kv := range c.KVs {
		if _, ok := kv.Get("after"); !ok {
			t.Errorf("m%d lacks the new leader's committed write", i)
		}
	}
	var e hraft.Log
	if err := old.Log().GetLog(n+1, &e); err != nil || e.Term == stale.Term {
		t.Errorf("old leader's index %d: term %d err %v, want the new leader's entry (not term %d)", n+1, e.Term, err, stale.Term)
	}
	checkNoGuardRefusals(t, "the old leader", events)
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
}
