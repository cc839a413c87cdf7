package raft_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
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

	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 3, faults, nil)
	led := newLedger()
	// An indeterminate outcome (a leader change under load) is the
	// ledger's to check; a rejection after wait is unavailability.
	propose := func(on int, key string) {
		t.Helper()
		_, err := c.Propose(on, key+"=v", wait)
		led.record(key, err)
		if err != nil && !errors.Is(err, raft.ErrIndeterminate) {
			t.Fatalf("propose %s on %s: %v", key, c.Cfgs[on].ID, err)
		}
	}
	l := c.WaitLeader(wait)
	for k := 0; k < 10; k++ {
		propose(l, fmt.Sprintf("a%d", k))
	}
	c.WaitConverged(wait)
	d := (l + 1) % 3 // the member that will diverge
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
	h := 3 - l - d
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
	events := collectEvents(t, c.Nodes[d])
	if st := c.Nodes[d].Status(); st.Diverged != nil || st.LastIndex != n+1 || st.PersistedFloor != n+1 {
		t.Fatalf("restarted member before any append: diverged %+v, last %d, persisted floor %d; want nil, %d, %d", st.Diverged, st.LastIndex, st.PersistedFloor, n+1, n+1)
	}
	faults.Rejoin(dAddr)

	var div raft.Divergence
	clustertest.WaitFor(t, wait, "the member to report its divergence", func() bool {
		st := c.Nodes[d].Status()
		if st.Diverged == nil {
			return false
		}
		div = *st.Diverged
		return true
	})
	if div.Index != n+1 || div.LocalTerm != oldTerm || div.LeaderTerm <= oldTerm || div.Floor != n+1 || div.Since.IsZero() {
		t.Fatalf("divergence %+v; want index %d, local term %d, a leader term above it, floor %d", div, n+1, oldTerm, n+1)
	}
	// The leader named is the one that sent appends in that term (read on
	// the wire, so a leader change under load cannot confuse the check).
	var sender hraft.ServerID
	for _, s := range faults.AppendEntriesSenders() {
		if s.Term == div.LeaderTerm {
			sender = s.Leader
		}
	}
	if string(sender) != div.Leader {
		t.Fatalf("divergence names leader %s in term %d; appends in that term came from %q", div.Leader, div.LeaderTerm, sender)
	}
	t.Logf("diverged: %+v", div)

	// The leader keeps retrying; every retry is refused, none announced.
	clustertest.WaitFor(t, wait, "three refused truncations", func() bool { return c.Nodes[d].Status().Diverged.Refusals >= 3 })
	// The cluster stays available, proposals forwarded by the diverged
	// member included.
	for k := 0; k < 5; k++ {
		propose([]int{l, h, d}[k%3], fmt.Sprintf("c%d", k))
	}
	c.WaitConvergedOf(wait, l, h)

	// walcompare names it, while the leader still holds the index.
	diagnose(t, n+1, oldTerm, walcompare.FromLogStore(dID, c.Nodes[d].Log()), walcompare.FromLogStore(c.Cfgs[l].ID, c.Nodes[l].Log()))

	// The others compact past the divergence: the leader's retries walk
	// below its first index and it sends snapshots instead, which the
	// diverged member refuses (installing one would repair it silently).
	for _, i := range []int{l, h} {
		r := c.Nodes[i].Raft()
		rc := r.ReloadableConfig()
		rc.TrailingLogs = 2
		if err := r.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
		if err := r.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if first := c.Nodes[i].Status().FirstIndex; first <= n+1 {
			t.Fatalf("%s compacted only to %d, not past %d", c.Cfgs[i].ID, first, n+1)
		}
	}
	// Two refusals: the leader retries only once its first install attempt
	// has returned, so whatever that attempt did is done when the checks
	// below run. The leader's backoff reaches ~10 s after many refusals.
	clustertest.WaitFor(t, 3*wait, "the diverged member to refuse two snapshots", func() bool {
		return len(events.of(func(e raft.Event) bool {
			return e.Kind == raft.EventSnapshotRejected && errors.Is(e.Err, raft.ErrDiverged) && e.Index > n+1
		})) >= 2
	})

	st := c.Nodes[d].Status()
	if st.Diverged == nil || st.Diverged.Since != div.Since || st.Diverged.Index != div.Index {
		t.Fatalf("divergence changed: %+v, first seen %+v", st.Diverged, div)
	}
	var diverged, refusals int
	for _, e := range events.of(func(raft.Event) bool { return true }) {
		switch e.Kind {
		case raft.EventDiverged:
			diverged++
			if e.Divergence == nil || e.Index != n+1 || e.Term != div.LeaderTerm || e.Leader != div.Leader ||
				e.Divergence.LocalTerm != oldTerm || e.Divergence.LeaderTerm != div.LeaderTerm || !e.Divergence.Since.Equal(div.Since) {
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
	if remote.Diverged == nil || remote.Diverged.Index != n+1 || remote.Diverged.LocalTerm != oldTerm ||
		remote.Diverged.LeaderTerm != div.LeaderTerm || remote.Diverged.Leader != div.Leader || remote.Diverged.Refusals < 3 {
		t.Fatalf("status over RPC: diverged %+v", remote.Diverged)
	}
	if g, ok := sink.Data()[0].Gauges["test.jobraft.raft.diverged;member="+dID]; !ok || g.Value != 1 {
		t.Fatalf("gauge jobraft.raft.diverged{member=%s}: %+v (present %t), want 1", dID, g, ok)
	}
	for _, i := range []int{l, h} {
		if g, ok := sink.Data()[0].Gauges["test.jobraft.raft.diverged;member="+c.Cfgs[i].ID]; !ok || g.Value != 0 {
			t.Fatalf("gauge of the healthy member %s: %+v (present %t), want 0", c.Cfgs[i].ID, g, ok)
		}
	}

	// Never repaired in place: its own entry stays, nothing of the leader's
	// past n is applied.
	var mine hraft.Log
	if err := c.Nodes[d].Log().GetLog(n+1, &mine); err != nil || mine.Term != oldTerm || segment.Checksum(mine.Data) != segment.Checksum(ghost.Data) {
		t.Fatalf("entry %d on the diverged member: term %d crc %08x, %v; want its own (term %d crc %08x)", n+1, mine.Term, segment.Checksum(mine.Data), err, oldTerm, segment.Checksum(ghost.Data))
	}
	if st.AppliedIndex > n || st.LastIndex != n+1 || st.FirstIndex != before.FirstIndex {
		t.Fatalf("diverged member applied %d, log [%d,%d]; want at most %d and [%d,%d]", st.AppliedIndex, st.FirstIndex, st.LastIndex, n, before.FirstIndex, n+1)
	}
	if snap := c.Nodes[d].Raft().Stats()["last_snapshot_index"]; snap != fmt.Sprint(n) {
		t.Fatalf("diverged member's latest snapshot at %s, want its own at %d", snap, n)
	}
	for _, k := range []string{"b0", "c0", "ghost"} {
		if w := c.KVs[d].Writes(k); w != 0 {
			t.Fatalf("diverged member applied %q %d times", k, w)
		}
	}

	// Recovery (docs/node.md, "A diverged member"): stop it, remove it,
	// keep its data dir aside for the diagnosis, and add it back empty; it
	// starts from the leader's snapshot.
	c.StopMember(d)
	rctx, rcancel := context.WithTimeout(context.Background(), wait)
	defer rcancel()
	membership(t, "remove "+dID, func(ctx context.Context) error { return c.Nodes[l].RemoveMember(ctx, dID) })
	aside := c.Cfgs[d].DataDir + ".diverged"
	if err := os.Rename(c.Cfgs[d].DataDir, aside); err != nil {
		t.Fatal(err)
	}
	m, err := walcompare.OpenDir(dID, aside)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := walcompare.Compare(rctx, []walcompare.Member{m}, walcompare.Options{}); err != nil || rep.Members[0].Floor != n+1 || rep.Members[0].Last != n+1 {
		t.Fatalf("set-aside data dir: %v %+v; want floor and last %d", err, rep, n+1)
	}
	m.Close()

	c.Cfgs[d].Bootstrap, c.Cfgs[d].InitialMembers = false, nil
	c.StartMember(d)
	events2, cancel2 := c.Nodes[d].Events(4096)
	defer cancel2()
	membership(t, "add "+dID, func(ctx context.Context) error { return c.Nodes[l].AddMember(ctx, dID, c.Nodes[d].Addr()) })
	for k := 0; k < 5; k++ {
		propose([]int{l, h, d}[k%3], fmt.Sprintf("d%d", k))
	}
	c.WaitConverged(wait)
	checkCommittedPrefix(t, c)
	checkNoGuardRefusals(t, "the re-seeded member", events2)
	if st := c.Nodes[d].Status(); st.Diverged != nil {
		t.Fatalf("re-seeded member diverged: %+v", st.Diverged)
	}
	if first := c.Nodes[d].Status().FirstIndex; first <= n+1 {
		t.Fatalf("re-seeded member's log starts at %d: it did not start from the leader's snapshot", first)
	}
	counts := led.check(t, dumpAll(c))
	t.Logf("outcomes: %v", counts)
	checkElectionSafety(t, faults)
}

// membership runs a membership change until it succeeds, within 2×wait:
// a leader change under load fails the call, and both changes are
// idempotent (docs/node.md, "A diverged member", recovery).
func membership(t *testing.T, what string, change func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(2 * wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err := change(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s (retried): %v", what, err)
	}
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
	segment.Stamp(ghost)
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

// diagnose compares the diverged member's log (first) with the leader's as
// the recovery procedure does: one committed divergence, a term mismatch at
// index, where the diverged member holds term.
func diagnose(t *testing.T, index, term uint64, diverged, leader walcompare.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	rep, err := walcompare.Compare(ctx, []walcompare.Member{diverged, leader}, walcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cd := rep.CommittedDivergences()
	if len(cd) != 1 || cd[0].Index != index || cd[0].Class != walcompare.TermMismatch || cd[0].Views[0].Term != term {
		t.Fatalf("walcompare of the diverged member with the leader: committed divergences %+v; want one term mismatch at %d", cd, index)
	}
	t.Logf("walcompare: committed divergence at %d (%s), boundary %d (%s)", cd[0].Index, cd[0].Class, rep.Committed, rep.CommittedBasis)
}

// eventLog collects a member's events as they come (a subscription read
// continuously, so none is dropped) until the member closes.
type eventLog struct {
	mu  sync.Mutex
	evs []raft.Event
}

func collectEvents(t *testing.T, n *raft.Node) *eventLog {
	ch, cancel := n.Events(4096)
	t.Cleanup(cancel)
	l := &eventLog{}
	go func() {
		for e := range ch {
			l.mu.Lock()
			l.evs = append(l.evs, e)
			l.mu.Unlock()
		}
	}()
	return l
}

// of returns the events collected so far that match keep.
func (l *eventLog) of(keep func(raft.Event) bool) []raft.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []raft.Event
	for _, e := range l.evs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
