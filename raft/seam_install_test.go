package raft_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// sendInstall sends one InstallSnapshot with its stream from a bare raft
// transport (a member of no cluster) to the member at target.
func sendInstall(t *testing.T, target string, req *hraft.InstallSnapshotRequest, data []byte) (*hraft.InstallSnapshotResponse, error) {
	t.Helper()
	mux, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	nt, err := mux.RaftTransport(transport.RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	req.Size = int64(len(data))
	var resp hraft.InstallSnapshotResponse
	err = nt.InstallSnapshot(hraft.ServerID("crafted"), hraft.ServerAddress(target), req, &resp, bytes.NewReader(data))
	return &resp, err
}

// kvSnapshotAt is an honest snapshot stream of member i's state machine as
// it is now, labelled with index: the adapter's header (the applied index,
// little-endian) and the KV's own Persist.
func kvSnapshotAt(t *testing.T, c *nodetest.Cluster, i int, index uint64) []byte {
	t.Helper()
	s, err := c.KVs[i].Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(binary.LittleEndian.AppendUint64(nil, index))
	if err := s.Persist(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// installFrom builds an InstallSnapshot in the name of the member leader
// (its ID, address and term), carrying the cluster's current configuration.
func installFrom(t *testing.T, leader *raft.Node, term, index, lastTerm uint64) *hraft.InstallSnapshotRequest {
	t.Helper()
	f := leader.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	confIndex, _ := strconv.ParseUint(leader.Raft().Stats()["latest_configuration_index"], 10, 64)
	return &hraft.InstallSnapshotRequest{
		RPCHeader:          hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.ID()), Addr: []byte(leader.Addr())},
		SnapshotVersion:    hraft.SnapshotVersionMax,
		Term:               term,
		LastLogIndex:       index,
		LastLogTerm:        lastTerm,
		Configuration:      hraft.EncodeConfiguration(f.Configuration()),
		ConfigurationIndex: confIndex,
	}
}

func proposeKeys(t *testing.T, c *nodetest.Cluster, via int, prefix string, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		if _, err := c.Propose(via, fmt.Sprintf("%s%d=v", prefix, k), wait); err != nil {
			t.Fatal(err)
		}
	}
}

func termAt(t *testing.T, n *raft.Node, index uint64) uint64 {
	t.Helper()
	var e hraft.Log
	if err := n.Log().GetLog(index, &e); err != nil {
		t.Fatalf("%s index %d: %v", n.ID(), index, err)
	}
	return e.Term
}

// unchanged fails when member n's log bounds, applied index or term moved
// since before.
func unchanged(t *testing.T, n *raft.Node, before raft.Status, what string) {
	t.Helper()
	st := n.Status()
	if st.AppliedIndex < before.AppliedIndex {
		t.Errorf("%s: applied index went back from %d to %d", what, before.AppliedIndex, st.AppliedIndex)
	}
	if st.FirstIndex != before.FirstIndex || st.LastIndex != before.LastIndex || n.Log().Floor() < before.Floor {
		t.Errorf("%s: log [%d, %d] floor %d, was [%d, %d] floor %d", what, st.FirstIndex, st.LastIndex, n.Log().Floor(),
			before.FirstIndex, before.LastIndex, before.Floor)
	}
	if last, _ := n.Log().LastIndex(); last != before.LastIndex {
		t.Errorf("%s: the wal's last index is %d, was %d", what, last, before.LastIndex)
	}
	if st.Term != before.Term {
		t.Errorf("%s: term %d, was %d", what, st.Term, before.Term)
	}
}

// TestStaleInstallSnapshotKeepsState is the regression test of
// docs/upstream.md U2 (Figure 13 step 6). A follower at commit C is sent, in
// its leader's name and term, an honest snapshot of its own state at an
// earlier index S < C. hashicorp/raft v1.7.3 alone restores it (the applied
// index and the state machine go back to S), resets the whole log,
// committed entries included, and keeps its cached last index, so the next
// append panics ("log not found") and kills the process. Through the seam
// the install is answered without restoring: the state, the applied index
// and the log stay, the guard refuses nothing, and the cluster converges.
func TestStaleInstallSnapshotKeepsState(t *testing.T) {
	faults := transport.NewFaultNetwork(1)
	c := nodetest.Start(t, 3, faults, nil)
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol := c.Nodes[f]
	at := fol.Status()
	s := at.AppliedIndex
	if at.LastIndex != s || at.CommitIndex != s {
		t.Fatalf("follower not idle at the snapshot point: %+v", at)
	}
	termS := termAt(t, fol, s)
	stream := kvSnapshotAt(t, c, f, s)

	proposeKeys(t, c, l, "b", 5)
	c.WaitConverged(wait)
	before := fol.Status()
	if before.CommitIndex <= s || before.AppliedIndex <= s {
		t.Fatalf("follower commit %d applied %d, want past the snapshot index %d", before.CommitIndex, before.AppliedIndex, s)
	}
	events, cancel := fol.Events(1024)
	defer cancel()

	leader := c.Nodes[l].Status()
	resp, err := sendInstall(t, fol.Addr(), installFrom(t, c.Nodes[l], leader.Term, s, termS), stream)
	if err != nil || !resp.Success {
		t.Fatalf("stale install: success %v term %d err %v, want Success (the member holds (%d, %d))", resp.Success, resp.Term, err, s, termS)
	}
	unchanged(t, fol, before, "after the stale install")
	if _, ok := c.KVs[f].Get("b4"); !ok {
		t.Error("the state machine lost a write committed after the snapshot index")
	}
	if st := fol.Status(); st.Seam.InstallsAnswered != 1 {
		t.Errorf("seam counters %+v, want one install answered", st.Seam)
	}
	checkNoGuardRefusals(t, "the follower", events)

	proposeKeys(t, c, l, "c", 5)
	c.WaitConverged(wait)
	unchangedFirst := fol.Status().FirstIndex
	if unchangedFirst != before.FirstIndex {
		t.Errorf("follower's first index moved from %d to %d", before.FirstIndex, unchangedFirst)
	}
	checkNoGuardRefusals(t, "the follower", events)
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
	checkElectionSafety(t, faults)
}

// TestCraftedInstallBelowTheFloor covers the seam's other answers to an
// install at or below the commit floor (docs/upstream.md U2):
//   - in a term higher than the member's it is refused and the term is not
//     adopted (raft would adopt it and restore);
//   - with another term than the one the member committed at that index it
//     is refused loudly (EventInstallDiverged, ErrCommittedDivergence);
//   - after the member compacted past the snapshot's index (it cannot
//     continue from there through appends) it is refused and the sender is
//     asked for a snapshot past the floor, which the leader takes.
//
// Nothing changes on the member in any case, and the cluster converges.
func TestCraftedInstallBelowTheFloor(t *testing.T) {
	faults := transport.NewFaultNetwork(2)
	c := nodetest.Start(t, 3, faults, func(cfg *raft.Config) { cfg.TrailingLogs = 4 })
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol, lead := c.Nodes[f], c.Nodes[l]
	s := fol.Status().AppliedIndex
	termS := termAt(t, fol, s)
	stream := kvSnapshotAt(t, c, f, s)
	proposeKeys(t, c, l, "b", 10)
	c.WaitConverged(wait)
	events, cancel := fol.Events(1024)
	defer cancel()
	term := lead.Status().Term

	// A higher term: refused, not adopted.
	before := fol.Status()
	resp, err := sendInstall(t, fol.Addr(), installFrom(t, lead, term+1, s, termS), stream)
	if err != nil || resp.Success || resp.Term != term {
		t.Fatalf("install in a higher term: success %v term %d err %v, want refused in term %d", resp.Success, resp.Term, err, term)
	}
	unchanged(t, fol, before, "after an install in a higher term")

	// Another term at a committed index: refused loudly.
	_, err = sendInstall(t, fol.Addr(), installFrom(t, lead, term, s, termS+1), stream)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(raft.ErrCommittedDivergence.Error())) {
		t.Fatalf("install with another term at committed index %d: err %v, want the committed divergence", s, err)
	}
	unchanged(t, fol, before, "after an install contradicting a committed entry")
	var diverged *raft.Event
	nodetest.WaitFor(t, wait, "the divergence event", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventGuardRefusal {
					t.Errorf("guard refusal: %v", e.Err)
				}
				if e.Kind == raft.EventInstallDiverged {
					diverged = &e
					return true
				}
			default:
				return false
			}
		}
	})
	if diverged.Index != s || diverged.Term != termS+1 || diverged.Leader != lead.ID() ||
		!errors.Is(diverged.Err, raft.ErrCommittedDivergence) || !errors.Is(diverged.Err, raft.ErrRefusedAtSeam) {
		t.Errorf("divergence event %+v", *diverged)
	}

	// The member compacts past the snapshot's index: it cannot continue
	// from there; the leader is asked for a newer snapshot.
	if err := fol.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	before = fol.Status()
	if before.FirstIndex <= s+1 {
		t.Fatalf("follower's log starts at %d after its snapshot, want past %d", before.FirstIndex, s+1)
	}
	leaderSnap := func() uint64 {
		v, _ := strconv.ParseUint(lead.Raft().Stats()["last_snapshot_index"], 10, 64)
		return v
	}
	if leaderSnap() > before.Floor {
		t.Fatalf("the leader already has a snapshot at %d past the follower's floor %d", leaderSnap(), before.Floor)
	}
	resp, err = sendInstall(t, fol.Addr(), installFrom(t, lead, term, s, termS), stream)
	if err != nil || resp.Success {
		t.Fatalf("install below a compacted log: success %v err %v, want refused", resp.Success, err)
	}
	unchanged(t, fol, before, "after an install below the compacted log")
	nodetest.WaitFor(t, wait, "the leader's snapshot past the follower's floor", func() bool { return leaderSnap() > before.Floor })

	st := fol.Status().Seam
	if st.InstallsDeferred != 1 || st.InstallsDiverged != 1 || st.InstallsBehind != 1 || st.InstallsAnswered != 0 {
		t.Errorf("seam counters %+v", st)
	}
	proposeKeys(t, c, l, "c", 5)
	c.WaitConverged(wait)
	checkNoGuardRefusals(t, "the follower", events)
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
	checkElectionSafety(t, faults)
}
