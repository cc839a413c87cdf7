package wal

// wal.Log as a drop-in raft.LogStore and raft.StableStore for a user who is
// not the jobraft node: every method answers ErrClosed after Close, and
// GetLog returns exactly what StoreLog was given (the store's own persist
// stamp stays inside the store).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestEveryMethodAnswersErrClosedAfterClose(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLog(stamped(1, 1, "a")); err != nil {
		t.Fatal(err)
	}
	if err := l.SetUint64([]byte("k"), 7); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var e raft.Log
	calls := map[string]error{
		"GetLog":      l.GetLog(1, &e),
		"StoreLog":    l.StoreLog(stamped(2, 1, "b")),
		"StoreLogs":   l.StoreLogs([]*raft.Log{stamped(2, 1, "b")}),
		"DeleteRange": l.DeleteRange(1, 1),
		"Set":         l.Set([]byte("k"), []byte("v")),
		"SetUint64":   l.SetUint64([]byte("k"), 8),
		"SyncFloor":   l.SyncFloor(),
		"Close":       l.Close(),
	}
	_, calls["FirstIndex"] = l.FirstIndex()
	_, calls["LastIndex"] = l.LastIndex()
	_, calls["Get"] = l.Get([]byte("k"))
	_, calls["GetUint64"] = l.GetUint64([]byte("k"))
	for name, err := range calls {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// An entry stored without a stamp gets one inside the store (so every read
// is verified), but GetLog hands back exactly the caller's Extensions: a
// leader's state machine (fed from its own copy) and a follower's (fed from
// its store) see the same input. A stamp the caller gave is the caller's
// and stays.
func TestGetLogReturnsWhatStoreLogWasGiven(t *testing.T) {
	for _, cache := range []int{0, 16} {
		dir := t.TempDir()
		l, err := Open(dir, WithCacheSize(cache))
		if err != nil {
			t.Fatal(err)
		}
		given := []*raft.Log{
			{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("no extensions")},
			{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("own extensions"), Extensions: []byte("caller's ext")},
			{Index: 3, Term: 1, Type: raft.LogNoop},
			stamped(4, 1, "stamped by the caller"),
		}
		want := make([]raft.Log, len(given))
		for i, g := range given {
			want[i] = *g
			want[i].Extensions = bytes.Clone(g.Extensions)
		}
		if err := l.StoreLogs(given); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			t.Helper()
			for i, w := range want {
				var e raft.Log
				if err := l.GetLog(w.Index, &e); err != nil {
					t.Fatalf("cache %d, %s: GetLog(%d): %v", cache, when, w.Index, err)
				}
				if !bytes.Equal(e.Extensions, w.Extensions) || !bytes.Equal(e.Data, w.Data) || e.Term != w.Term || e.Type != w.Type {
					t.Fatalf("cache %d, %s: GetLog(%d) = ext %d bytes %q data %d bytes, StoreLog was given ext %d bytes %q data %d bytes",
						cache, when, w.Index, len(e.Extensions), e.Extensions, len(e.Data), len(w.Extensions), w.Extensions, len(w.Data))
				}
				if i == 0 && len(given[0].Extensions) != 0 {
					t.Fatalf("the caller's entry was modified")
				}
			}
		}
		check("after StoreLogs")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if l, err = Open(dir, WithCacheSize(cache)); err != nil {
			t.Fatal(err)
		}
		check("after a reopen")
		l.Close()
	}
}

// extFSM counts the applied entries that carry any Extensions.
type extFSM struct {
	*counterFSM
	withExt atomic.Int64
}

func (f *extFSM) Apply(l *raft.Log) interface{} {
	if len(l.Extensions) > 0 {
		f.withExt.Add(1)
	}
	return f.counterFSM.Apply(l)
}

// A plain hashicorp/raft cluster on *Log, as its LogStore and StableStore,
// with nothing jobraft-specific: no floor bound, no stamps. Its snapshots
// compact every member's log (an unbound log trusts raft's compaction,
// which never passes a persisted snapshot), the floor rises to the
// compaction and is durable, and no state machine sees bytes its leader's
// did not (no persist stamp in Extensions).
func TestPlainRaftClusterCompactsWithoutFloorBinding(t *testing.T) {
	const n = 3
	type member struct {
		r     *raft.Raft
		fsm   *extFSM
		log   *Log
		trans *raft.InmemTransport
	}
	var refusals atomic.Int64
	var ms []*member
	var servers []raft.Server
	for i := 0; i < n; i++ {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("p%d", i)))
		l, err := Open(t.TempDir(), WithSegmentSize(8<<10), OnRefusal(func(err error) {
			refusals.Add(1)
			t.Logf("refusal: %v", err)
		}))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, &member{fsm: &extFSM{counterFSM: &counterFSM{}}, log: l, trans: trans})
		servers = append(servers, raft.Server{ID: raft.ServerID(addr), Address: addr})
	}
	for i, m := range ms {
		for j, o := range ms {
			if i != j {
				m.trans.Connect(o.trans.LocalAddr(), o.trans)
			}
		}
		cfg := raft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.HeartbeatTimeout = 300 * time.Millisecond
		cfg.ElectionTimeout = 300 * time.Millisecond
		cfg.LeaderLeaseTimeout = 250 * time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
		cfg.SnapshotThreshold = 1 << 20 // snapshots on demand below
		cfg.TrailingLogs = 10
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
		r, err := raft.NewRaft(cfg, m.fsm, m.log, m.log, raft.NewInmemSnapshotStore(), m.trans)
		if err != nil {
			t.Fatal(err)
		}
		m.r = r
		t.Cleanup(func() { r.Shutdown().Error(); m.log.Close() })
	}
	if err := ms[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	leader := func() *member {
		for _, m := range ms {
			if m.r.State() == raft.Leader {
				return m
			}
		}
		return nil
	}
	var want uint64
	for id := uint64(1); id <= 120; id++ {
		cmd := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, id), id)
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			l := leader()
			if l == nil {
				waitFor(t, 10*time.Second, "a leader", func() bool { return leader() != nil })
				continue
			}
			if err = l.r.Apply(cmd, 2*time.Second).Error(); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("apply %d: %v", id, err)
		}
		want += id
	}
	waitFor(t, 10*time.Second, "every member to apply everything", func() bool {
		for _, m := range ms {
			if sum, _ := m.fsm.state(); sum != want {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if err := m.r.Snapshot().Error(); err != nil {
			t.Fatalf("%s: snapshot: %v", m.trans.LocalAddr(), err)
		}
		first, _ := m.log.FirstIndex()
		last, _ := m.log.LastIndex()
		if first <= 1 || last-first+1 > 10+1 {
			t.Fatalf("%s: log [%d, %d] after a snapshot with 10 trailing entries: not compacted", m.trans.LocalAddr(), first, last)
		}
		if pf := m.log.PersistedFloor(); pf < first-1 {
			t.Fatalf("%s: compacted to %d, durable floor %d", m.trans.LocalAddr(), first-1, pf)
		}
		if k := m.fsm.withExt.Load(); k != 0 {
			t.Fatalf("%s: %d applied entries carried extensions; every command was proposed without", m.trans.LocalAddr(), k)
		}
	}
	if k := refusals.Load(); k != 0 {
		t.Fatalf("%d guard refusals in a plain raft cluster", k)
	}
}

// The floor an unbound log derives from a compaction is durable: reopened
// (still unbound), the log reports it, and after a reset refuses a first
// entry at or below it (G2), as it would with a bound floor.
func TestCompactionFloorOfAnUnboundLogSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 30; i++ {
		if err := l.StoreLog(stamped(i, 1, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteRange(1, 20); err != nil {
		t.Fatalf("compaction of an unbound log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if f, first := l.PersistedFloor(), must(l.FirstIndex()); f < 20 || first != 21 {
		t.Fatalf("reopened: durable floor %d, first index %d; want at least 20 and 21", f, first)
	}
	if err := l.DeleteRange(21, 30); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if err := l.StoreLog(stamped(20, 2, "y")); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("first entry 20 after a reset with floor %d: %v, want ErrNotContiguous", l.Floor(), err)
	}
	if err := l.StoreLog(stamped(21, 2, "y")); err != nil {
		t.Fatalf("first entry 21 after the reset: %v", err)
	}
}

func must(v uint64, err error) uint64 {
	if err != nil {
		panic(err)
	}
	return v
}
