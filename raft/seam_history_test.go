package raft_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// A follower may commit only what the leader's append verified: up to
// PrevLogEntry + len(Entries) (the Raft paper's Figure 2), never its own
// last index (hashicorp/raft v1.7.3, docs/failures.md §8).
//
// The shape: leader m(old) of term T1 holds the committed log up to N, is
// isolated, and appends N+1 in T1 (a proposal that cannot commit). The
// others elect a leader of a higher term T2, which commits its no-op at N+1.
// Then the old leader receives, from a bare raft transport on the mux
// protocol, an append carrying the new leader's ID, address and term T2,
// verifying only N (PrevLogEntry N with N's term, no entries), with a leader
// commit index above N. It must not commit, let alone apply, its stale N+1.
//
// The verdict is the applied-history checker's (internal/history): every
// entry the old leader's state machine applied must be the committed entry
// at its index. Without the clamp at the seam the old leader applies its
// stale N+1 and this test fails with the checker naming it:
//
//	applied-history violation: member m0 applied index N+1 term T1 crc …,
//	committed log has term T2 crc 00000000 (…); applied a LogCommand where
//	the committed entry is a LogNoop
//
// After the verdict the network heals: the old leader cuts its stale entry
// (never committed), all members converge and nothing stale was applied
// anywhere.
func TestCraftedCommitAheadOfVerifiedAppendAppliesNothingStale(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	faults := transport.NewFaultNetwork(seed)
	c := nodetest.Start(t, 3, faults, nil)
	old := c.WaitLeader(wait)
	for _, key := range []string{"a", "b", "c", "d"} {
		if _, err := c.Propose(old, key+"=v", wait); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(wait)
	before := c.Nodes[old].Status()
	n, oldTerm := before.CommitIndex, before.Term
	var last hraft.Log
	if err := c.Nodes[old].Log().GetLog(n, &last); err != nil || last.Type != hraft.LogCommand || before.LastIndex != n {
		t.Fatalf("setup: the old leader's last entry %d (of %d) is not the committed command %d: %v %v", before.LastIndex, n, n, last.Type, err)
	}

	// The stale entry: appended by the isolated leader in its term.
	faults.Isolate(addr(c.Nodes[old]))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := c.Propose(old, "stale=x", 2*time.Second)
		if err == nil || !errors.Is(err, raft.ErrIndeterminate) {
			t.Errorf("proposal on the isolated leader: %v, want indeterminate", err)
		}
	}()
	nodetest.WaitFor(t, wait, "the isolated leader to append the stale entry", func() bool {
		return c.Nodes[old].Status().LastIndex == n+1
	})
	var stale hraft.Log
	if err := c.Nodes[old].Log().GetLog(n+1, &stale); err != nil || stale.Term != oldTerm || stale.Type != hraft.LogCommand {
		t.Fatalf("stale entry %d: term %d type %v (%v), want a command of term %d", n+1, stale.Term, stale.Type, err, oldTerm)
	}

	// The others elect a leader of a higher term, which commits past N+1.
	var nl int
	nodetest.WaitFor(t, wait, "a leader of a higher term committing past the stale index", func() bool {
		nl = c.Leader()
		return nl >= 0 && nl != old && c.Nodes[nl].Status().Term > oldTerm && c.Nodes[nl].Status().CommitIndex > n+1
	})
	ns := c.Nodes[nl].Status()
	var committed hraft.Log
	if err := c.Nodes[nl].Log().GetLog(n+1, &committed); err != nil || committed.Term == oldTerm {
		t.Fatalf("new leader's entry %d: term %d (%v), want one of its own term", n+1, committed.Term, err)
	}

	// The crafted append: the new leader's identity and term, verifying N
	// only, with a leader commit index above N.
	nt := bareTransport(t)
	req := hraft.AppendEntriesRequest{
		RPCHeader:         hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(ns.ID), Addr: []byte(ns.Address)},
		Term:              ns.Term,
		PrevLogEntry:      n,
		PrevLogTerm:       last.Term,
		LeaderCommitIndex: max(n+1, ns.CommitIndex),
	}
	var resp hraft.AppendEntriesResponse
	if err := nt.AppendEntries(hraft.ServerID(c.Cfgs[old].ID), addr(c.Nodes[old]), &req, &resp); err != nil {
		t.Fatalf("crafted append: %v", err)
	}
	if !resp.Success || resp.Term != ns.Term {
		t.Fatalf("crafted append verifying index %d term %d refused: %+v", n, last.Term, resp)
	}
	nodetest.WaitFor(t, wait, "the old leader to apply what it counts committed", func() bool {
		s := c.Nodes[old].Status()
		return s.AppliedIndex >= s.CommitIndex
	})
	st := c.Nodes[old].Status()
	t.Logf("old leader %s after the crafted append (prev %d/%d, leader commit %d): term %d, commit %d, applied %d; new leader %s term %d commit %d",
		st.ID, n, last.Term, req.LeaderCommitIndex, st.Term, st.CommitIndex, st.AppliedIndex, ns.ID, ns.Term, ns.CommitIndex)

	// The verdict: what the old leader applied against the committed log.
	if vs := c.CheckApplied(false); len(vs) > 0 {
		t.Fatal(nodetest.ViolationReport(vs))
	}
	if st.CommitIndex > n {
		t.Errorf("the old leader counts index %d committed; the append verified only up to %d", st.CommitIndex, n)
	}

	// Heal: the stale entry is cut, everyone converges, nothing stale was
	// applied anywhere.
	faults.Heal()
	wg.Wait()
	c.WaitConverged(wait)
	if _, err := c.Propose(old, "after=v", wait); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(wait)
	for i, kv := range c.KVs {
		if _, ok := kv.Get("stale"); ok {
			t.Errorf("%s applied the stale entry", c.Cfgs[i].ID)
		}
	}
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
	checkElectionSafety(t, faults)
}
