package raft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// The lying disk's shape of chaos seed 16 (docs/chaos.md, "A lying disk"),
// on real files and TCP. A (the leader) commits entries with B alone (C is
// down) while B's disk lies; A compacts past all of them (a snapshot, two
// trailing entries); A is cut off, B loses power and comes back with its
// log as it was when the lie began; B and C elect a leader of a higher
// term that writes at the lost indexes and never compacts. When A heals,
// the leader's appends start below A's first index: raft's lookup of the
// previous entry fails ("log not found"), the leader walks back to index 1
// and stays there, raft never asks A to cut anything (no guard refusal)
// and sends no snapshot (its log holds every entry). A committed and
// applied entries the leader does not hold; it must report Diverged (its
// term index still knows the terms of what it compacted) and change
// nothing, and the others go on. Without the term index in the seam's
// divergentEntry, A walks the leader back for ever and reports nothing.
func TestCompactedDivergenceIsReported(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("faultnet seed %d", seed)
	net := faultnet.New(seed)
	var ffs [3]*faultfs.FS
	c := clustertest.StartNodesWAL(t, 3, net, nil, func(i int) []wal.Option {
		ffs[i] = faultfs.New(wal.OSFS{})
		return []wal.Option{wal.WithFS(ffs[i])}
	})
	a := c.WaitLeader(wait)
	proposeKeys(t, c, a, "warm", 3)
	c.WaitConverged(wait)
	b, w := (a+1)%3, (a+2)%3
	addr := func(i int) hraft.ServerAddress { return hraft.ServerAddress(c.Cfgs[i].BindAddr) }
	k := c.Nodes[a].Status().LastIndex // every member holds [1,k]

	// C stops; B's disk lies from now on: the checkpoint is what it will
	// hold after its power loss.
	c.StopMember(w)
	ck := filepath.Join(t.TempDir(), "b-log-when-the-lie-began")
	bLog := filepath.Join(c.Cfgs[b].DataDir, "log")
	if err := ffs[b].Checkpoint(bLog, ck, isSegment); err != nil {
		t.Fatal(err)
	}
	// A commits and applies twenty entries with B's lying acknowledgements,
	// then compacts past every one of them.
	proposeKeys(t, c, a, "lost", 20)
	termA := c.Nodes[a].Status().Term
	r := c.Nodes[a].Raft()
	rc := r.ReloadableConfig()
	rc.TrailingLogs = 2
	if err := r.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	before := c.Nodes[a].Status()
	floor := c.Nodes[a].Log().Floor()
	if before.FirstIndex <= k+1 || floor < k+20 {
		t.Fatalf("setup: A's log [%d,%d] floor %d; want it compacted past %d and a floor of at least %d", before.FirstIndex, before.LastIndex, floor, k+1, k+20)
	}
	if got, ok := c.Nodes[a].Log().TermAt(k + 1); !ok || got != termA {
		t.Fatalf("setup: A's term index at %d: %d %v, want %d", k+1, got, ok, termA)
	}
	events := collectEvents(t, c.Nodes[a])

	// A is cut off; B loses power (its log goes back to the checkpoint) and
	// restarts; with C it elects a leader of a higher term, which writes
	// at the indexes A committed.
	net.Isolate(addr(a))
	c.StopMember(b)
	if err := faultfs.Restore(bLog, ck, isSegment); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ck); err != nil {
		t.Fatal(err)
	}
	c.StartMember(b)
	c.StartMember(w)
	var l int
	clustertest.WaitFor(t, wait, "B or C to lead a later term", func() bool {
		for _, i := range []int{b, w} {
			if s := c.Nodes[i].Status(); s.Role == "Leader" && s.Term > termA {
				l = i
				return true
			}
		}
		return false
	})
	for j := 0; j < 3; j++ {
		if _, err := c.Propose(l, fmt.Sprintf("new%d=v", j), wait); err != nil {
			t.Fatal(err)
		}
	}
	agreeOf(t, c, b, w)
	lead := c.Nodes[l].Status()
	if lead.FirstIndex != 1 || lead.LastIndex >= before.FirstIndex || termOf(c, l, k+1) <= termA {
		t.Fatalf("setup: the new leader's log [%d,%d], term %d at %d; want [1, below A's first index %d] with a later term than %d at %d",
			lead.FirstIndex, lead.LastIndex, termOf(c, l, k+1), k+1, before.FirstIndex, termA, k+1)
	}

	// A heals: it must report the divergence from the leader's appends.
	net.Heal()
	var div raft.Divergence
	clustertest.WaitFor(t, wait, "A to report its divergence", func() bool {
		st := c.Nodes[a].Status()
		if st.Diverged == nil {
			return false
		}
		div = *st.Diverged
		return true
	})
	t.Logf("diverged: %+v", div)
	if div.Index != k+1 || div.LocalTerm != termA || div.LeaderTerm != lead.Term || div.Leader != c.Cfgs[l].ID || div.Floor < k+20 {
		t.Fatalf("divergence %+v; want index %d, local term %d, leader %s term %d, floor at least %d", div, k+1, termA, c.Cfgs[l].ID, lead.Term, k+20)
	}

	// Nothing changed on A, and no snapshot or cut was involved; the others
	// go on without it.
	proposeKeys(t, c, l, "after", 3)
	agreeOf(t, c, b, w)
	st := c.Nodes[a].Status()
	if st.FirstIndex != before.FirstIndex || st.LastIndex != before.LastIndex || st.AppliedIndex != before.AppliedIndex || st.Role == "Leader" {
		t.Fatalf("A after the divergence: log [%d,%d] applied %d role %s; was [%d,%d] applied %d",
			st.FirstIndex, st.LastIndex, st.AppliedIndex, st.Role, before.FirstIndex, before.LastIndex, before.AppliedIndex)
	}
	if st.Seam.InstallsDiverged != 0 || st.Seam.InstallsVerified != 0 || st.Seam.InstallsUnverified != 0 {
		t.Fatalf("A's seam counters %+v: the shape needs no snapshot install", st.Seam)
	}
	if n := len(events.of(func(e raft.Event) bool { return e.Kind == raft.EventGuardRefusal })); n != 0 {
		t.Fatalf("%d guard refusals on A: the shape needs none (raft never asks to cut a compacted entry)", n)
	}
	if n := len(events.of(func(e raft.Event) bool { return e.Kind == raft.EventDiverged })); n != 1 {
		t.Fatalf("%d diverged events on A, want 1", n)
	}
	for j := 0; j < 20; j++ {
		if v, ok := c.KVs[a].Get(fmt.Sprintf("lost%d", j)); !ok || v != "v" {
			t.Fatalf("A lost lost%d (%q %v): it keeps what it applied", j, v, ok)
		}
	}
	if _, ok := c.KVs[a].Get("new0"); ok {
		t.Fatal("A applied the new leader's entry new0")
	}
}

// agreeOf waits until members agree (clustertest.Agree) without the
// applied-history checker of WaitConvergedOf: after a lie, the members
// that held the lost entries applied what the cluster's log no longer
// holds (the fault's, not the code's).
func agreeOf(t *testing.T, c *clustertest.NodeCluster, members ...int) {
	t.Helper()
	clustertest.WaitFor(t, wait, fmt.Sprintf("members %v to agree", members), func() bool {
		var sts []raft.Status
		for _, i := range members {
			sts = append(sts, c.Nodes[i].Status())
		}
		return clustertest.Agree(sts)
	})
}
