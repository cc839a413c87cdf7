package raft_test

import (
	"strconv"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/wal/segment"
)

// A follower whose log is empty after a verified install (it adopted the
// sender's term index through P1) is sent a second install at P2 > P1
// before any append, by a sender that cannot say its terms (known 0: an
// old version, or a member that itself lost its index). The check passes
// it unverified and raft installs it; hashicorp/raft's removeOldLogs does
// no DeleteRange on an empty log, so the wal is not reset. The first
// sender's list must not survive: the member's state is the P2 snapshot's,
// so its term index answers nothing at or below P2, before or after the
// next append (found by a review: the list used to answer for P1, and then
// for every index in (P1, P2], with the first sender's terms).
func TestSecondInstallOnAnEmptyLogDropsTheFirstTermIndex(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 5)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	fol := c.Nodes[f]
	// The follower alone: only the crafted installs reach it.
	for i := range c.Nodes {
		if i != f {
			c.StopMember(i)
		}
	}
	st := fol.Status()
	own := fol.Log().TermStarts(st.LastIndex)
	if own.Known == 0 {
		t.Fatalf("follower does not know its own terms through %d", st.LastIndex)
	}

	// Install 1 at P1: a sender with the follower's own history: verified,
	// adopted.
	p1 := st.LastIndex + 100
	addr1, _ := forgedTerms(t, own.Known, own.Starts)
	req := installFrom(t, fol, fol.Status().Term, p1, st.LastTerm)
	req.RPCHeader.ID, req.RPCHeader.Addr = []byte("forger1"), []byte(addr1)
	if resp, err := sendInstall(t, fol.Addr(), req, kvSnapshotAt(t, c, f, p1)); err != nil || !resp.Success {
		t.Fatalf("install 1: success %v err %v", resp.Success, err)
	}
	if s := fol.Status().Seam; s.InstallsVerified != 1 {
		t.Fatalf("install 1 not verified: %+v", s)
	}
	if got, ok := fol.Log().TermAt(p1); !ok || got != st.LastTerm {
		t.Fatalf("after install 1, TermAt(%d) = %d %v, want %d (adopted)", p1, got, ok, st.LastTerm)
	}

	// Install 2 at P2, of a history in which a new term began below P1; its
	// sender knows no terms. Unverified (the documented policy), installed.
	p2, t2 := p1+100, fol.Status().Term+1
	addr2, _ := forgedTerms(t, 0, nil)
	req = installFrom(t, fol, t2, p2, t2)
	req.RPCHeader.ID, req.RPCHeader.Addr = []byte("forger2"), []byte(addr2)
	if resp, err := sendInstall(t, fol.Addr(), req, kvSnapshotAt(t, c, f, p2)); err != nil || !resp.Success {
		t.Fatalf("install 2: success %v err %v", resp.Success, err)
	}
	if s := fol.Status().Seam; s.InstallsUnverified != 1 {
		t.Fatalf("install 2 not passed unverified: %+v", s)
	}
	if snap := fol.Raft().Stats()["last_snapshot_index"]; snap != strconv.FormatUint(p2, 10) {
		t.Fatalf("raft's snapshot at %s, want %d", snap, p2)
	}
	if got, ok := fol.Log().TermAt(p1); ok {
		t.Errorf("after install 2 (unverified, another history), TermAt(%d) = %d, known: install 1's term index survived", p1, got)
	}
	// The leader's first append after install 2 (written here directly).
	e := &hraft.Log{Index: p2 + 1, Term: t2, Type: hraft.LogNoop}
	segment.Stamp(e)
	if err := fol.Log().StoreLogs([]*hraft.Log{e}); err != nil {
		t.Fatal(err)
	}
	if got, ok := fol.Log().TermAt(p1 + 50); ok {
		t.Errorf("TermAt(%d) = %d, known: the log never learned a term in (%d, %d]", p1+50, got, p1, p2)
	}
	if got := fol.Log().TermStarts(p2); got.Known != 0 {
		t.Errorf("TermStarts(%d) = %+v: would answer jr.terms with install 1's history through install 2's snapshot", p2, got)
	}
}
