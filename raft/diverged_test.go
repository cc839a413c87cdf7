package raft_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/walcompare"
)

// A member that holds, at or below its commit floor, an entry its leader
// does not have is diverged: loud (Status.Diverged, one EventDiverged, a
// gauge), never repaired in place, and recovered by re-seeding it.
//
// The state is built honestly on disk: a follower is stopped, the others
// move to a higher term and commit past it, and the stopped member's wal
// gets, offline and through the wal API, an entry of its old term at the
// next index with its commit floor raised over it (what disk damage or a
// data dir copied from elsewhere leaves). Restarted, its guard must refuse
// the leader's truncation of that entry.
func TestDivergedMemberIsLoudAndRecoverable(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	mcfg := metrics.DefaultConfig("test")
	mcfg.EnableHostname, mcfg.EnableRuntimeMetrics = false, false
	if _, err := metrics.NewGlobal(mcfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { metrics.NewGlobal(mcfg, &metrics.BlackholeSink{}) })

	faults := transport.NewFaultNetwork(seed)
	c := nodetest.Start(t, 3, faults, nil)
	led := newLedger()
	propose := func(on int, key string) {
		t.Helper()
		_, err := c.Propose(on, key+"=v", wait)
		led.record(key, err)
		if err != nil {
			t.Fatalf("propose %s on %s: %v", key, c.Cfgs[on].ID, err)
		}
	}
	l := c.WaitLeader(wait)
	for k := 0; k < 10; k++ {
		propose(l, fmt.Sprintf("a%d", k))
	}
	c.WaitConverged(wait)
	d, h := (l+1)%3, (l+2)%3
	dID := c.Cfgs[d].ID
	// A snapshot, so the member restarts with state applied (the check
	// below that it applies nothing of the leader's is not vacuous).
	if err := c.Nodes[d].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	before := c.Nodes[d].Status()
	n, oldTerm := before.LastIndex, before.LastTerm
	c.StopMember(d)

	// The others move to a higher term and commit past n.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].TransferLeadership(ctx, c.Cfgs[h].ID); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, wait, "a leader in a higher term", func() bool {
		l = c.Leader()
		return l >= 0 && c.Nodes[l].Status().Term > oldTerm
	})
	h = 3 - l - d
	for k := 0; k < 5; k++ {
		propose(l, fmt.Sprintf("b%d", k))
	}
	var theirs hraft.Log
	if err := c.Nodes[l].Log().GetLog(n+1, &theirs); err != nil || theirs.Term <= oldTerm {
		t.Fatalf("leader's entry %d: term %d (old term %d), %v", n+1, theirs.Term, oldTerm, err)
	}

	// Offline: the stopped member gets its own entry n+1 in the old term,
	// and a commit floor that covers it.
	ghost := writeGhost(t, filepath.Join(c.Cfgs[d].DataDir, "log"), n+1, oldTerm)

	// Restart it cut off, so its events are watched before any append
	// reaches it.
	dAddr := hraft.ServerAddress(c.Cfgs[d].BindAddr)
	faults.Isolate(dAddr)
	c.StartMember(d)
	events, cancelEvents := c.Nodes[d].Events(4096)
	defer cancelEvents()
	if st := c.Nodes[d].Status(); st.Diverged != nil || st.LastIndex != n+1 || st.PersistedFloor != n+1 {
		t.Fatalf("restarted member before any append: diverged %+v, last %d, persisted floor %d; want nil, %d, %d", st.Diverged, st.LastIndex, st.PersistedFloor, n+1, n+1)
	}
	faults.Rejoin(dAddr)

	var div raft.Divergence
	nodetest.WaitFor(t, wait, "the member to report its divergence", func() bool {
		st := c.Nodes[d].Status()
		if st.Diverged == nil {
			return false
		}
		div = *st.Diverged
		return true
	})
	lst := c.Nodes[l].Status()
	if div.Index != n+1 || div.LocalTerm != oldTerm || div.LeaderTerm != lst.Term || div.Leader != lst.ID || div.Floor != n+1 || div.Since.IsZero() {
		t.Fatalf("divergence %+v; want index %d, local term %d, leader %s in term %d, floor %d", div, n+1, oldTerm, lst.ID, lst.Term, n+1)
	}
	t.Logf("diverged: %+v", div)

	// The leader keeps retrying; every retry is refused, none announced.
	nodetest.WaitFor(t, wait, "three refused truncations", func() bool { return c.Nodes[d].Status().Diverged.Refusals >= 3 })
	// The cluster stays available, proposals forwarded by the diverged
	// member included.
	for k := 0; k < 5; k++ {
		propose([]int{l, h, d}[k%3], fmt.Sprintf("c%d", k))
	}
	c.WaitConvergedOf(wait, l, h)

	st := c.Nodes[d].Status()
	if st.Diverged == nil || st.Diverged.Since != div.Since || st.Diverged.Index != div.Index {
		t.Fatalf("divergence changed: %+v, first seen %+v", st.Diverged, div)
	}
	var diverged, refusals int
	for drained := false; !drained; {
		select {
		case e := <-events:
			switch e.Kind {
			case raft.EventDiverged:
				diverged++
				if e.Divergence == nil || e.Index != n+1 || e.Term != lst.Term || e.Leader != lst.ID || e.Divergence.LocalTerm != oldTerm {
					t.Errorf("diverged event %+v (divergence %+v)", e, e.Divergence)
				}
				var ge *wal.GuardError
				if !errors.As(e.Err, &ge) || !errors.Is(e.Err, wal.ErrCommittedTruncate) || ge.Min != n+1 {
					t.Errorf("diverged event carries %v, want the refused truncation from %d", e.Err, n+1)
				}
			case raft.EventGuardRefusal:
				refusals++
			case raft.EventRoleChange:
				if e.Role == "Leader" {
					t.Errorf("the diverged member became leader in term %d", e.Term)
				}
			}
		default:
			drained = true
		}
	}
	if diverged != 1 || refusals < 3 {
		t.Fatalf("%d diverged events and %d guard refusals on %s; want exactly 1 and at least 3", diverged, refusals, dID)
	}
	t.Logf("%d guard refusals, 1 diverged event; status refusals %d", refusals, st.Diverged.Refusals)

	// Over the status RPC, as the leader sees it.
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	remote, err := c.Nodes[l].StatusOf(sctx, c.Nodes[d].Addr())
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	if remote.Diverged == nil || remote.Diverged.Index != n+1 || remote.Diverged.LocalTerm != oldTerm || remote.Diverged.LeaderTerm != lst.Term {
		t.Fatalf("status over RPC: diverged %+v", remote.Diverged)
	}
	if g, ok := sink.Data()[0].Gauges["test.jobraft.raft.diverged;member="+dID]; !ok || g.Value != 1 {
		t.Fatalf("gauge jobraft.raft.diverged{member=%s}: %+v (present %t), want 1", dID, g, ok)
	}
	if g := sink.Data()[0].Gauges["test.jobraft.raft.diverged;member="+lst.ID]; g.Value != 0 {
		t.Fatalf("gauge of the leader %s: %v, want 0", lst.ID, g.Value)
	}

	// Never repaired in place: its own entry stays, nothing of the leader's
	// past n is applied.
	var mine hraft.Log
	if err := c.Nodes[d].Log().GetLog(n+1, &mine); err != nil || mine.Term != oldTerm || wal.Checksum(mine.Data) != wal.Checksum(ghost.Data) {
		t.Fatalf("entry %d on the diverged member: term %d crc %08x, %v; want its own (term %d crc %08x)", n+1, mine.Term, wal.Checksum(mine.Data), err, oldTerm, wal.Checksum(ghost.Data))
	}
	if st.AppliedIndex > n || st.LastIndex != n+1 {
		t.Fatalf("diverged member applied %d, last %d; want at most %d and %d", st.AppliedIndex, st.LastIndex, n, n+1)
	}
	for _, k := range []string{"b0", "c0", "ghost"} {
		if w := c.KVs[d].Writes(k); w != 0 {
			t.Fatalf("diverged member applied %q %d times", k, w)
		}
	}

	// Recovery (docs/node.md, "A diverged member"): stop it, remove it,
	// keep its data dir aside for the diagnosis, and add it back empty.
	c.StopMember(d)
	rctx, rcancel := context.WithTimeout(context.Background(), wait)
	defer rcancel()
	if err := c.Nodes[l].RemoveMember(rctx, dID); err != nil {
		t.Fatal(err)
	}
	aside := c.Cfgs[d].DataDir + ".diverged"
	if err := os.Rename(c.Cfgs[d].DataDir, aside); err != nil {
		t.Fatal(err)
	}
	diagnose(t, aside, dID, c.Nodes[l], n+1, oldTerm)

	c.Cfgs[d].Bootstrap, c.Cfgs[d].InitialMembers = false, nil
	c.StartMember(d)
	events2, cancel2 := c.Nodes[d].Events(4096)
	defer cancel2()
	if err := c.Nodes[l].AddMember(rctx, dID, c.Nodes[d].Addr()); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 5; k++ {
		propose([]int{l, h, d}[k%3], fmt.Sprintf("d%d", k))
	}
	c.WaitConverged(wait)
	checkCommittedPrefix(t, c)
	checkNoGuardRefusals(t, "the re-seeded member", events2)
	if st := c.Nodes[d].Status(); st.Diverged != nil {
		t.Fatalf("re-seeded member diverged: %+v", st.Diverged)
	}
	var now hraft.Log
	if err := c.Nodes[d].Log().GetLog(n+1, &now); err != nil || now.Term != theirs.Term {
		t.Fatalf("re-seeded member's entry %d: term %d, %v; want the leader's term %d", n+1, now.Term, err, theirs.Term)
	}
	counts := led.check(t, dumpAll(c))
	t.Logf("outcomes: %v", counts)
	checkElectionSafety(t, faults)
}

// writeGhost appends, offline, a stamped command entry at index in term to
// the wal at dir and raises its persisted commit floor to index.
func writeGhost(t *testing.T, dir string, index, term uint64) *hraft.Log {
	t.Helper()
	lg, err := wal.Open(dir, wal.RequireStamp())
	if err != nil {
		t.Fatal(err)
	}
	// A command envelope (raft/envelope.go): version 1, the leader's clock,
	// the command.
	data := binary.LittleEndian.AppendUint64([]byte{1}, uint64(time.Now().UnixNano()))
	data = append(data, "ghost=local"...)
	ghost := &hraft.Log{Index: index, Term: term, Type: hraft.LogCommand, Data: data, AppendedAt: time.Now()}
	wal.Stamp(ghost)
	if err := lg.StoreLogs([]*hraft.Log{ghost}); err != nil {
		t.Fatal(err)
	}
	lg.SetCommitFloor(func() uint64 { return index })
	if err := lg.SyncFloor(); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	return ghost
}

// diagnose compares the set-aside data dir with the leader's log as the
// recovery procedure does: one committed divergence, a term mismatch at
// index, where the diverged member holds term.
func diagnose(t *testing.T, dir, name string, leader *raft.Node, index, term uint64) {
	t.Helper()
	m, err := walcompare.OpenDir(name, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	rep, err := walcompare.Compare(ctx, []walcompare.Member{m, walcompare.FromLogStore(leader.ID(), leader.Log())}, walcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cd := rep.CommittedDivergences()
	if len(cd) != 1 || cd[0].Index != index || cd[0].Class != walcompare.TermMismatch || cd[0].Views[0].Term != term {
		t.Fatalf("walcompare of the set-aside dir with the leader: committed divergences %+v; want one term mismatch at %d", cd, index)
	}
	t.Logf("walcompare: committed divergence at %d (%s), boundary %d (%s)", cd[0].Index, cd[0].Class, rep.Committed, rep.CommittedBasis)
}
