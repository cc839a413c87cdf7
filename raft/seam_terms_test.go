package raft_test

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal/segment"
)

// A follower cut off while the others move on and compact past its log is
// sent the leader's snapshot when it rejoins. The seam reads the leader's
// term index (jr.terms), finds the leader's term at the follower's commit
// floor equal to its own, and lets raft install it (InstallsVerified);
// after the install the follower holds the leader's term index through the
// snapshot (AdoptTerms), so it can answer for the history it holds only as
// a snapshot.
func TestInstallPastTheFloorIsCheckedAndAdoptsTheTermIndex(t *testing.T) {
	faults := faultnet.New(3)
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.TrailingLogs = 2 })
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol, lead := c.Nodes[f], c.Nodes[l]
	floor := fol.Log().Floor()
	own, ok := fol.Log().TermAt(floor)
	if floor == 0 || !ok {
		t.Fatalf("follower floor %d, term there %d known %v", floor, own, ok)
	}

	fAddr := hraft.ServerAddress(c.Cfgs[f].BindAddr)
	faults.Isolate(fAddr)
	proposeKeys(t, c, l, "b", 20)
	for _, i := range []int{l, (l + 2) % 3} {
		if err := c.Nodes[i].Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if first := c.Nodes[i].Status().FirstIndex; first <= fol.Status().LastIndex+1 {
			t.Fatalf("%s compacted only to %d, not past the follower's last %d", c.Cfgs[i].ID, first, fol.Status().LastIndex)
		}
	}
	faults.Rejoin(fAddr)
	c.WaitConverged(wait)

	st := fol.Status()
	if st.Seam.InstallsVerified < 1 || st.Seam.InstallsUnverified != 0 || st.Seam.InstallsDiverged != 0 || st.Diverged != nil {
		t.Fatalf("follower's seam counters %+v, diverged %+v: want a verified install", st.Seam, st.Diverged)
	}
	snap, _ := strconv.ParseUint(fol.Raft().Stats()["last_snapshot_index"], 10, 64)
	if snap <= floor {
		t.Fatalf("follower's snapshot at %d, not past its old floor %d", snap, floor)
	}
	got, want := fol.Log().TermStarts(snap), lead.Log().TermStarts(snap)
	if got.Known == 0 || got.Known != want.Known || !slices.Equal(got.Starts, want.Starts) {
		t.Fatalf("follower's term index through %d: %+v; the leader's: %+v", snap, got, want)
	}
	if got, ok := fol.Log().TermAt(floor); !ok || got != own {
		t.Fatalf("follower's term at its old floor %d: %d %v, want %d", floor, got, ok, own)
	}
	checkCommittedPrefix(t, c)
	checkAppliedHistory(t, c)
}

// forgedTerms serves jr.terms with a given term index (known 0: one that
// knows nothing), in the name of a member of no cluster; every request is
// counted.
func forgedTerms(t *testing.T, known uint64, starts []segment.TermStart) (addr string, asked *int) {
	t.Helper()
	mux, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mux.Close() })
	n := new(int)
	mux.Handle("jr.terms", func(_ context.Context, req []byte) ([]byte, error) {
		*n++
		return segment.TermList{Known: known, Through: binary.LittleEndian.Uint64(req), Starts: starts}.Encode(), nil
	})
	return mux.Addr(), n
}

// An install past the floor from a sender whose term at the member's floor
// differs from the member's own is refused loudly (the member is diverged,
// nothing changes); from a sender that cannot be asked, refused quietly
// (InstallsUnasked, the leader retries).
func TestInstallPastTheFloorFromAnotherHistoryIsRefused(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol, lead := c.Nodes[f], c.Nodes[l]
	events, cancel := fol.Events(1024)
	defer cancel()
	term := lead.Status().Term
	before := fol.Status()
	floor := fol.Log().Floor()
	held, _ := fol.Log().TermAt(floor)
	past := before.LastIndex + 1000
	forge := func(addr string, lastTerm uint64) *hraft.InstallSnapshotRequest {
		req := installFrom(t, lead, term, past, lastTerm)
		req.RPCHeader.ID, req.RPCHeader.Addr = []byte("forger"), []byte(addr)
		return req
	}

	// Unreachable: refused, nothing changes.
	closed, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr()
	closed.Close()
	resp, err := sendInstall(t, fol.Addr(), forge(dead, term), []byte("never read by raft"))
	if err != nil || resp.Success {
		t.Fatalf("install from an unreachable sender: success %v err %v, want refused", resp.Success, err)
	}
	unchanged(t, fol, before, "after an install from an unreachable sender")
	if st := fol.Status(); st.Seam.InstallsUnasked != 1 || st.Diverged != nil {
		t.Fatalf("seam counters %+v, diverged %+v: want one unasked install", st.Seam, st.Diverged)
	}

	// Another history: the sender held term held+5 from the floor on.
	addr, asked := forgedTerms(t, 1, []segment.TermStart{{Index: 1, Term: 1}, {Index: floor, Term: held + 5}})
	_, err = sendInstall(t, fol.Addr(), forge(addr, held+5), []byte("never read by raft"))
	if err == nil || !strings.Contains(err.Error(), raft.ErrCommittedDivergence.Error()) || *asked != 1 {
		t.Fatalf("install from another history: err %v, asked %d; want the committed divergence, asked once", err, *asked)
	}
	unchanged(t, fol, before, "after an install from another history")
	var diverged *raft.Event
	clustertest.WaitFor(t, wait, "the divergence event", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventDiverged {
					diverged = &e
					return true
				}
			default:
				return false
			}
		}
	})
	if d := diverged.Divergence; d == nil || d.Index != floor || d.LocalTerm != held || d.Leader != "forger" || d.LeaderTerm != term ||
		!errors.Is(diverged.Err, raft.ErrCommittedDivergence) || !errors.Is(diverged.Err, raft.ErrRefusedAtSeam) {
		t.Errorf("divergence event %+v (divergence %+v)", *diverged, diverged.Divergence)
	}
	if st := fol.Status(); st.Diverged == nil || st.Diverged.Index != floor || st.Seam.InstallsDiverged != 1 || st.Seam.InstallsVerified != 0 {
		t.Errorf("Status.Diverged %+v, seam %+v: want the divergence at the floor %d", st.Diverged, st.Seam, floor)
	}
	proposeKeys(t, c, l, "c", 5)
	c.WaitConvergedOf(wait, l, (l+2)%3)
	checkNoGuardRefusals(t, "the follower", events)
}

// The floor check compares the terms at the floor F itself. A sender whose
// history agrees with the member's through F-1 and starts another term
// exactly at F holds another entry at F, which the member committed: its
// install past the floor is refused loudly, the member diverged at F, and
// nothing changes. (A check one index low would find the histories equal.)
func TestInstallPastTheFloorFromAHistoryForkedAtTheFloorIsRefused(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol, lead := c.Nodes[f], c.Nodes[l]
	events, cancel := fol.Events(1024)
	defer cancel()
	term := lead.Status().Term
	before := fol.Status()
	floor := fol.Log().Floor()
	held, okF := fol.Log().TermAt(floor)
	below, okB := fol.Log().TermAt(floor - 1)
	own := fol.Log().TermStarts(floor - 1)
	if floor < 2 || !okF || !okB || own.Known == 0 || own.Known > floor-1 {
		t.Fatalf("follower floor %d: term there %d (%v), at %d %d (%v), term index %+v: the setup needs both known",
			floor, held, okF, floor-1, below, okB, own)
	}
	t.Logf("follower floor %d (term %d), term %d at %d, its term index through there %+v", floor, held, below, floor-1, own)
	// The follower's own term index through F-1, then term held+5 from F.
	starts := append(own.Starts[:len(own.Starts):len(own.Starts)], segment.TermStart{Index: floor, Term: held + 5})
	addr, asked := forgedTerms(t, own.Known, starts)
	forged := segment.TermList{Known: own.Known, Through: floor, Starts: starts}
	if got, _ := forged.TermAt(floor - 1); got != below {
		t.Fatalf("the forged history holds term %d at %d, want the follower's %d", got, floor-1, below)
	}
	req := installFrom(t, lead, term, before.LastIndex+1000, held+5)
	req.RPCHeader.ID, req.RPCHeader.Addr = []byte("forger"), []byte(addr)

	_, err := sendInstall(t, fol.Addr(), req, []byte("never read by raft"))
	if err == nil || !strings.Contains(err.Error(), raft.ErrCommittedDivergence.Error()) || *asked != 1 {
		t.Fatalf("install from a history that agrees through %d and holds term %d at the floor %d (the follower's: %d): err %v, asked %d; want the committed divergence, asked once",
			floor-1, held+5, floor, held, err, *asked)
	}
	unchanged(t, fol, before, "after an install from a history forked at the floor")
	var diverged *raft.Event
	clustertest.WaitFor(t, wait, "the divergence event", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventDiverged {
					diverged = &e
					return true
				}
			default:
				return false
			}
		}
	})
	if d := diverged.Divergence; d == nil || d.Index != floor || d.LocalTerm != held || d.Leader != "forger" ||
		!errors.Is(diverged.Err, raft.ErrCommittedDivergence) {
		t.Errorf("divergence event %+v (divergence %+v), want at the floor %d, local term %d", *diverged, diverged.Divergence, floor, held)
	}
	if st := fol.Status(); st.Diverged == nil || st.Diverged.Index != floor || st.Seam.InstallsDiverged != 1 ||
		st.Seam.InstallsVerified != 0 || st.Seam.InstallsUnverified != 0 {
		t.Errorf("Status.Diverged %+v, seam %+v: want one install diverged at the floor %d, none passed to raft", st.Diverged, st.Seam, floor)
	}
	checkNoGuardRefusals(t, "the follower", events)
}
