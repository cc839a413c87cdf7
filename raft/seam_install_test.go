package raft_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// sendInstall sends one InstallSnapshot with its stream from a bare raft
// transport (a member of no cluster) to the member at target.
func sendInstall(t *testing.T, target string, req *hraft.InstallSnapshotRequest, data []byte) (*hraft.InstallSnapshotResponse, error) {
	t.Helper()
	nt := bareTransport(t)
	req.Size = int64(len(data))
	var resp hraft.InstallSnapshotResponse
	err := nt.InstallSnapshot(hraft.ServerID("crafted"), hraft.ServerAddress(target), req, &resp, bytes.NewReader(data))
	return &resp, err
}

// kvSnapshotAt is an honest snapshot stream of member i's state machine as
// it is now, labelled with index: the adapter's header (the applied index,
// little-endian) and the KV's own Persist.
func kvSnapshotAt(t *testing.T, c *clustertest.NodeCluster, i int, index uint64) []byte {
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

func proposeKeys(t *testing.T, c *clustertest.NodeCluster, via int, prefix string, n int) {
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
	// Nothing removed: the same first index and every entry up to the old
	// last one still there (the leader may have appended since: a refused
	// install asks it for a newer snapshot, which it takes after barriers).
	if st.FirstIndex != before.FirstIndex || st.LastIndex < before.LastIndex || n.Log().Floor() < before.Floor {
		t.Errorf("%s: log [%d, %d] floor %d, was [%d, %d] floor %d", what, st.FirstIndex, st.LastIndex, n.Log().Floor(),
			before.FirstIndex, before.LastIndex, before.Floor)
	}
	var e hraft.Log
	if err := n.Log().GetLog(before.LastIndex, &e); err != nil || e.Term != before.LastTerm {
		t.Errorf("%s: the wal's entry %d: term %d err %v, was term %d", what, before.LastIndex, e.Term, err, before.LastTerm)
	}
	if last, _ := n.Log().LastIndex(); last < before.LastIndex {
		t.Errorf("%s: the wal's last index is %d, was %d", what, last, before.LastIndex)
	}
	if st.Term >= craftedTermGap {
		t.Errorf("%s: term %d, the crafted request's term was adopted", what, st.Term)
	}
}

// craftedTermGap is how far above the leader's term a crafted request's
// "higher term" lies: elections under load never get that far, so a
// member in that term adopted the crafted one.
const craftedTermGap = 1000

// TestStaleInstallSnapshotKeepsState is the regression test of
// docs/upstream.md U2 (Figure 13 step 6). A follower at commit C is sent, in
// its leader's name and term, an honest snapshot of its own state at an
// earlier index S < C. hashicorp/raft v1.7.3 alone restores it (the applied
// index and the state machine go back to S), resets the whole log,
// committed entries included, and keeps its cached last index, so the next
// append panics ("log not found") and kills the process. Through the seam
// the install is answered without restoring: the state, the applied index
// and the log stay, the guard refuses nothing, and the cluster converges
// after leadership moves to the third member (the audit's U3(b) sequence).
func TestStaleInstallSnapshotKeepsState(t *testing.T) {
	faults := faultnet.New(1)
	c := clustertest.StartNodes(t, 3, faults, nil)
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

	// The audit's U3(b) sequence: leadership moves to the third member,
	// whose first append to the follower starts at the follower's last
	// index; then more writes.
	o := (l + 2) % 3
	ctx, cancel2 := context.WithTimeout(context.Background(), wait)
	defer cancel2()
	if err := c.Nodes[l].TransferLeadership(ctx, c.Nodes[o].ID()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, wait, "the third member leading", func() bool { return c.Leader() == o })
	proposeKeys(t, c, o, "c", 5)
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
//   - after the member compacted past the snapshot's index (it cannot
//     continue from there through appends) it is refused and the sender is
//     asked for a snapshot past the floor, which the leader takes;
//   - with another term than the one the member committed at that index it
//     is refused loudly (ErrCommittedDivergence) and the member is diverged
//     (Status.Diverged, EventDiverged).
//
// Nothing changes on the member's log and state in any case, and the
// cluster converges.
func TestCraftedInstallBelowTheFloor(t *testing.T) {
	faults := faultnet.New(2)
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.TrailingLogs = 4 })
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
	resp, err := sendInstall(t, fol.Addr(), installFrom(t, lead, term+craftedTermGap, s, termS), stream)
	if err != nil || resp.Success || resp.Term != term {
		t.Fatalf("install in a higher term: success %v term %d err %v, want refused in term %d", resp.Success, resp.Term, err, term)
	}
	unchanged(t, fol, before, "after an install in a higher term")

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
	clustertest.WaitFor(t, wait, "the leader's snapshot past the follower's floor", func() bool { return leaderSnap() > before.Floor })

	// Another term at a committed index the log holds: refused loudly.
	c.WaitConverged(wait) // the leader moved its log to take that snapshot
	before = fol.Status()
	at := before.FirstIndex
	held := termAt(t, fol, at)
	_, err = sendInstall(t, fol.Addr(), installFrom(t, lead, term, at, held+1), stream)
	if err == nil || !strings.Contains(err.Error(), raft.ErrCommittedDivergence.Error()) {
		t.Fatalf("install with another term at committed index %d: err %v, want the committed divergence", at, err)
	}
	unchanged(t, fol, before, "after an install contradicting a committed entry")
	var diverged *raft.Event
	clustertest.WaitFor(t, wait, "the divergence event", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventGuardRefusal {
					t.Errorf("guard refusal: %v", e.Err)
				}
				if e.Kind == raft.EventDiverged {
					diverged = &e
					return true
				}
			default:
				return false
			}
		}
	})
	if d := diverged.Divergence; d == nil || d.Index != at || d.LocalTerm != held || d.Leader != lead.ID() || d.LeaderTerm != term ||
		!errors.Is(diverged.Err, raft.ErrCommittedDivergence) || !errors.Is(diverged.Err, raft.ErrRefusedAtSeam) {
		t.Errorf("divergence event %+v (divergence %+v)", *diverged, diverged.Divergence)
	}
	if d := fol.Status().Diverged; d == nil || d.Index != at {
		t.Errorf("Status.Diverged %+v, want the divergence at %d", d, at)
	}

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

// TestStaleMatchingTailRefusesAppendAtStaleIndex is the regression test of
// docs/upstream.md U3(b), the matching-tail shape of a stale last index.
// A follower holds entries past its commit index that agree with the
// leader's (sent to it while it was cut off, not yet known committed). It
// installs a snapshot that ends inside that tail but whose last term the
// log does not hold (crafted, from a sender that does not know its term at
// the follower's floor: the seam lets it through to raft unverified), so
// raft resets the log and keeps its cached last
// index, which the leader's log also holds. Leadership then moves to the
// third member, whose first append to the follower has PrevLogEntry = that
// stale index. hashicorp/raft v1.7.3 alone passes it on the cache, stores
// the new entry above a hole and panics ("log not found") at the next
// commit. Through the seam the append is refused, the follower does not
// campaign, the leader is asked for a snapshot past the stale index
// (stale.go) and the follower converges with a contiguous log.
func TestStaleMatchingTailRefusesAppendAtStaleIndex(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.TrailingLogs = 4 })
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f, o := (l+1)%3, (l+2)%3
	lead, fol, third := c.Nodes[l], c.Nodes[f], c.Nodes[o]
	base := fol.Status()
	last, term := base.LastIndex, base.Term
	if base.CommitIndex != last || term < 2 || lead.Status().Term != term {
		t.Fatalf("not idle: follower %+v, leader term %d", base, lead.Status().Term)
	}
	stream := kvSnapshotAt(t, c, f, last+1) // the state at last+1, a barrier

	// The leader and the third member commit a barrier and three writes.
	// Cut off from both (not isolated: it must reach the sender below).
	faults.Partition(addr(fol), addr(lead))
	faults.Partition(addr(fol), addr(third))
	if err := lead.Raft().Barrier(wait).Error(); err != nil {
		t.Fatal(err)
	}
	proposeKeys(t, c, l, "t", 3)
	tail := lead.Status().LastIndex
	var entries []*hraft.Log
	for i := last + 1; i <= tail; i++ {
		e := new(hraft.Log)
		if err := lead.Log().GetLog(i, e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	if entries[0].Type != hraft.LogBarrier || tail < last+3 || lead.Status().Term != term {
		t.Fatalf("leader's tail (%d, %d] in term %d, first entry %v: not the shape", last, tail, lead.Status().Term, entries[0].Type)
	}
	c.WaitConvergedOf(wait, l, o)

	// The follower gets them without learning they are committed.
	resp := sendAppend(t, fol.Addr(), &hraft.AppendEntriesRequest{
		RPCHeader:    hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(lead.ID()), Addr: []byte(lead.Addr())},
		Term:         term,
		PrevLogEntry: last, PrevLogTerm: termAt(t, fol, last),
		Entries:           entries,
		LeaderCommitIndex: last,
	})
	if !resp.Success {
		t.Fatalf("tail append refused (term %d, last %d)", resp.Term, resp.LastLog)
	}
	if st := fol.Status(); st.LastIndex != tail || fol.Log().Floor() != last {
		t.Fatalf("follower last %d floor %d, want %d and %d", st.LastIndex, fol.Log().Floor(), tail, last)
	}

	// A snapshot inside the tail, with a last term the log does not hold,
	// from a sender that does not know its term at the follower's floor:
	// the seam hands it to raft unverified (seam_terms.go).
	unknown, asked := forgedTerms(t, 0, nil)
	req := installFrom(t, lead, term, last+1, term-1)
	req.RPCHeader.Addr = []byte(unknown)
	ir, err := sendInstall(t, fol.Addr(), req, stream)
	if err != nil || !ir.Success || *asked != 1 || fol.Status().Seam.InstallsUnverified != 1 {
		t.Fatalf("install past the floor: success %v err %v, sender asked %d times, seam %+v", ir.Success, err, *asked, fol.Status().Seam)
	}
	if walLast, _ := fol.Log().LastIndex(); walLast != 0 || fol.Raft().LastIndex() != tail {
		t.Fatalf("not the stale shape: wal last %d, raft last %d (want 0 and %d)", walLast, fol.Raft().LastIndex(), tail)
	}

	// Leadership moves to the third member, whose log ends at the stale
	// index.
	faults.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := lead.TransferLeadership(ctx, third.ID()); err != nil {
		t.Fatal(err)
	}
	events, cancelEvents := fol.Events(4096)
	defer cancelEvents()
	clustertest.WaitFor(t, wait, "the third member leading", func() bool { return c.Leader() == o })
	clustertest.WaitFor(t, wait, "an append at the stale index refused", func() bool {
		return fol.Status().Seam.StaleAppendsRefused > 0
	})
	proposeKeys(t, c, o, "c", 5)
	c.WaitConverged(wait)

	st := fol.Status()
	t.Logf("follower seam counters %+v", st.Seam)
	if st.Role == "Leader" {
		t.Error("the follower became leader")
	}
	// Its state comes from a snapshot past the stale index, and its log is
	// contiguous from there.
	snap, _ := strconv.ParseUint(fol.Raft().Stats()["last_snapshot_index"], 10, 64)
	if snap <= tail {
		t.Errorf("follower's latest snapshot ends at %d, at or below the stale index %d", snap, tail)
	}
	walFirst, _ := fol.Log().FirstIndex()
	walLast, _ := fol.Log().LastIndex()
	if walLast != 0 && walFirst > snap+1 {
		t.Errorf("follower's log [%d, %d] does not connect to its snapshot at %d", walFirst, walLast, snap)
	}
	for i := walFirst; i <= walLast && walLast != 0; i++ {
		var e hraft.Log
		if err := fol.Log().GetLog(i, &e); err != nil {
			t.Fatalf("follower's log has a hole at %d in [%d, %d]: %v", i, walFirst, walLast, err)
		}
	}
	checkNoGuardRefusals(t, "the follower", events)
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
	checkElectionSafety(t, faults)
}
