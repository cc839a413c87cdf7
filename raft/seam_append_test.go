package raft_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
)

// staleTail is an old leader holding a stale tail of its old term, cut off
// while the others elected a new leader in a higher term that committed
// past the old leader's committed prefix.
type staleTail struct {
	faults *faultnet.Network
	c      *clustertest.NodeCluster
	l      int         // the old leader
	old    *raft.Node  // c.Nodes[l]
	n      uint64      // its committed prefix
	prev   hraft.Log   // its entry at n
	tail   uint64      // its last index (the stale tail is n+1..tail)
	stale  hraft.Log   // its entry at n+1
	nl     int         // the new leader
	leader raft.Status // the new leader's status
}

// startStaleTail builds a staleTail: the old leader is isolated (it hears
// nothing from the others; crafted requests from a bare transport reach it).
func startStaleTail(t *testing.T) staleTail {
	t.Helper()
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

	// The isolated old leader appends a tail it can never commit.
	faults.Isolate(addr(old))
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Propose(l, fmt.Sprintf("lost%d=1", i), 2*time.Second); err == nil {
				t.Error("a proposal on an isolated leader reported success")
			}
		}()
	}
	wg.Wait()
	tail := old.Status().LastIndex
	if tail <= n {
		t.Fatalf("the isolated leader holds no stale tail (last %d, committed prefix %d)", tail, n)
	}
	var stale hraft.Log
	if err := old.Log().GetLog(n+1, &stale); err != nil {
		t.Fatal(err)
	}

	// A new leader among the others, in a higher term.
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
	return staleTail{faults: faults, c: c, l: l, old: old, n: n, prev: prev, tail: tail, stale: stale, nl: nl, leader: c.Nodes[nl].Status()}
}

// TestRefusedBatchAfterTruncationConverges is the regression test of
// docs/upstream.md U4. hashicorp/raft v1.7.3 truncates a conflicting
// suffix (DeleteRange) and only then stores the new entries; when the guard
// refuses that batch the handler returns with its cached last index still
// at the old tail's end, above the real log, and every later append that
// reaches the cut index fails: the member never converges. A deposed leader
// holding a stale tail n+1.. of its old term is sent, in the new leader's
// name and term, prev=n and one unstamped command at n+1 (the guard refuses
// it: RequireStamp). The seam must refuse the append as a whole before raft
// truncates: Success=false, raft's last index equal to the log's, the stale
// tail still there, one guard refusal. An append whose refused batch needs
// no truncation is left to raft (nothing changes either). After the heal
// the member converges.
func TestRefusedBatchAfterTruncationConverges(t *testing.T) {
	sc := startStaleTail(t)
	faults, c, old, n, prev, tail, stale, leader := sc.faults, sc.c, sc.old, sc.n, sc.prev, sc.tail, sc.stale, sc.leader
	events, cancel := old.Events(1024)
	defer cancel()

	// In the new leader's name and term: prev=n matches, the entry at n+1
	// conflicts with the stale one (so raft would truncate n+1..tail), and
	// it is an unstamped command (so the guard refuses to store it).
	header := hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(leader.Address)}
	t.Logf("old leader: term %d, committed prefix %d, stale tail %d..%d (term %d); new leader %s term %d",
		old.Status().Term, n, n+1, tail, stale.Term, leader.ID, leader.Term)
	resp := sendAppend(t, old.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader:         header,
		Term:              leader.Term,
		PrevLogEntry:      n,
		PrevLogTerm:       prev.Term,
		Entries:           []*hraft.Log{{Index: n + 1, Term: leader.Term, Type: hraft.LogCommand, Data: []byte("x")}},
		LeaderCommitIndex: n,
	})
	walLast, err := old.Log().LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	raftLast := old.Raft().LastIndex()
	if resp.Success {
		t.Fatal("an append whose unstamped command the guard refuses was answered Success=true")
	}
	if raftLast != walLast {
		t.Fatalf("after the refused append raft's last index is %d, the log's %d: truncation happened without the store", raftLast, walLast)
	}
	if walLast != tail {
		t.Fatalf("the log's last index is %d, want the stale tail's %d untouched", walLast, tail)
	}
	if resp.LastLog != walLast {
		t.Errorf("refusal reports LastLog %d, want the log's last index %d", resp.LastLog, walLast)
	}
	if st := old.Status(); st.Seam.AppendsRefused != 1 {
		t.Errorf("Status.Seam.AppendsRefused = %d, want 1", st.Seam.AppendsRefused)
	}
	waitGuardRefusal(t, events, wal.ErrUnstamped)

	// Without a conflict the refused batch is raft's to answer (nothing is
	// truncated, so nothing goes wrong): prev=tail matches, the unstamped
	// command at tail+1 is refused by the guard, and the seam lets it pass.
	var last hraft.Log
	if err := old.Log().GetLog(tail, &last); err != nil {
		t.Fatal(err)
	}
	resp = sendAppend(t, old.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader: header, Term: leader.Term, PrevLogEntry: tail, PrevLogTerm: last.Term,
		Entries:           []*hraft.Log{{Index: tail + 1, Term: leader.Term, Type: hraft.LogCommand, Data: []byte("y")}},
		LeaderCommitIndex: n,
	})
	if resp.Success || old.Raft().LastIndex() != tail || old.Status().Seam.AppendsRefused != 1 {
		t.Fatalf("append past the tail with an unstamped command: success %v, raft last %d (want %d), seam refusals %d (want still 1: this one is raft's)",
			resp.Success, old.Raft().LastIndex(), tail, old.Status().Seam.AppendsRefused)
	}
	waitGuardRefusal(t, events, wal.ErrUnstamped)

	faults.Heal()
	c.WaitConverged(wait)
	var e hraft.Log
	if err := old.Log().GetLog(n+1, &e); err != nil || e.Term == stale.Term {
		t.Errorf("old leader's index %d: term %d err %v, want the new leader's entry (not term %d)", n+1, e.Term, err, stale.Term)
	}
	for i, kv := range c.KVs {
		if _, ok := kv.Get("after"); !ok {
			t.Errorf("m%d lacks the new leader's committed write", i)
		}
	}
	checkNoGuardRefusals(t, "the old leader", events)
	checkCommittedPrefix(t, c)
	checkElectionSafety(t, faults)
}

// The same conflict as TestRefusedBatchAfterTruncationConverges after the
// old leader adopted the new leader's term — the normal case, where raft
// has already heard from the leader whose append it is: the append carries
// the member's own term, and the seam must check the truncation and the
// store together just as for a higher term (U4). A heartbeat in the new
// leader's name makes the old leader a follower in its term; then prev=n
// and an unstamped command at n+1 are refused whole, nothing is cut, and
// after the heal the member converges.
func TestRefusedBatchAfterTruncationInTheMembersTerm(t *testing.T) {
	sc := startStaleTail(t)
	c, old, n, prev, tail, leader := sc.c, sc.old, sc.n, sc.prev, sc.tail, sc.leader
	events, cancel := old.Events(1024)
	defer cancel()
	header := hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(leader.Address)}

	// The new leader's heartbeat (prev=n matches, nothing to append): the
	// old leader adopts its term and follows it.
	if resp := sendAppend(t, old.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader: header, Term: leader.Term, PrevLogEntry: n, PrevLogTerm: prev.Term, LeaderCommitIndex: n,
	}); !resp.Success {
		t.Fatalf("the new leader's append with no entries at prev %d was refused (term %d)", n, resp.Term)
	}
	if st := old.Status(); st.Term != leader.Term || st.LastIndex != tail {
		t.Fatalf("old leader in term %d with last index %d after the new leader's heartbeat, want term %d with its stale tail to %d",
			st.Term, st.LastIndex, leader.Term, tail)
	}

	resp := sendAppend(t, old.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader:         header,
		Term:              leader.Term,
		PrevLogEntry:      n,
		PrevLogTerm:       prev.Term,
		Entries:           []*hraft.Log{{Index: n + 1, Term: leader.Term, Type: hraft.LogCommand, Data: []byte("x")}},
		LeaderCommitIndex: n,
	})
	if term := old.Status().Term; term != leader.Term {
		t.Fatalf("old leader moved to term %d while the append was sent, want %d: the append was not in its term", term, leader.Term)
	}
	walLast, err := old.Log().LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	raftLast := old.Raft().LastIndex()
	if resp.Success {
		t.Fatal("an append whose unstamped command the guard refuses was answered Success=true")
	}
	if raftLast != walLast {
		t.Fatalf("after the refused append in the member's term raft's last index is %d, the log's %d: truncation happened without the store", raftLast, walLast)
	}
	if walLast != tail {
		t.Fatalf("the log's last index is %d, want the stale tail's %d untouched", walLast, tail)
	}
	if st := old.Status(); st.Seam.AppendsRefused != 1 {
		t.Errorf("Status.Seam.AppendsRefused = %d, want 1", st.Seam.AppendsRefused)
	}
	waitGuardRefusal(t, events, wal.ErrUnstamped)

	sc.faults.Heal()
	c.WaitConverged(wait)
	for i, kv := range c.KVs {
		if _, ok := kv.Get("after"); !ok {
			t.Errorf("m%d lacks the new leader's committed write", i)
		}
	}
	checkNoGuardRefusals(t, "the old leader", events)
	checkCommittedPrefix(t, c)
	checkElectionSafety(t, sc.faults)
}

// waitGuardRefusal waits for the guard refusal event matching want on a
// member's subscription, failing on any other guard refusal before it.
func waitGuardRefusal(t testing.TB, events <-chan raft.Event, want error) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("event subscription closed before the guard refusal")
			}
			if e.Kind != raft.EventGuardRefusal {
				continue
			}
			if !errors.Is(e.Err, want) {
				t.Fatalf("guard refusal %v, want %v", e.Err, want)
			}
			return
		case <-deadline:
			t.Fatalf("no guard refusal event (%v) within %v", want, wait)
		}
	}
}

// TestCraftedNilEntryIsRefused: hashicorp/raft v1.7.3 dereferences every
// entry of an append it processes, so a nil entry (a msgpack nil in the
// list, from any peer) panics the follower's main loop and kills the
// process. The seam refuses such an append; the member keeps serving and
// converging.
func TestCraftedNilEntryIsRefused(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	if _, err := c.Propose(l, "before=1", wait); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(wait)
	f := (l + 1) % len(c.Nodes)
	leader := c.Nodes[l].Status()
	n := c.Nodes[f].Status().LastIndex
	var prev hraft.Log
	if err := c.Nodes[f].Log().GetLog(n, &prev); err != nil {
		t.Fatal(err)
	}
	resp := sendAppend(t, c.Nodes[f].Addr(), &hraft.AppendEntriesRequest{
		RPCHeader:    hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(leader.Address)},
		Term:         leader.Term,
		PrevLogEntry: n, PrevLogTerm: prev.Term,
		Entries: []*hraft.Log{nil},
	})
	if resp.Success || resp.LastLog != n {
		t.Fatalf("append with a nil entry: success %v last %d, want refused with last %d", resp.Success, resp.LastLog, n)
	}
	if got := c.Nodes[f].Status().Seam.AppendsRefused; got != 1 {
		t.Errorf("Status.Seam.AppendsRefused = %d, want 1", got)
	}
	if _, err := c.Propose(l, "after=1", wait); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(wait)
	checkCommittedPrefix(t, c)
}
