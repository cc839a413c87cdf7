package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// counterFSM sums the values of the commands it applies. A command is
// (id, value), two little-endian uint64s; ids are proposed one at a time in
// increasing order, so an id not above the highest applied is a retry of a
// proposal whose outcome was unknown (ErrLeadershipLost: the next leader
// may still commit it) and is applied once only.
type counterFSM struct {
	mu    sync.Mutex
	sum   uint64
	n     uint64
	maxID uint64
}

func (f *counterFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := binary.LittleEndian.Uint64(l.Data)
	if id <= f.maxID {
		return nil
	}
	f.maxID = id
	f.sum += binary.LittleEndian.Uint64(l.Data[8:])
	f.n++
	return nil
}

func (f *counterFSM) state() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.n
}

type counterSnap struct{ sum, n, maxID uint64 }

func (s counterSnap) Persist(sink raft.SnapshotSink) error {
	b := binary.LittleEndian.AppendUint64(nil, s.sum)
	b = binary.LittleEndian.AppendUint64(b, s.n)
	b = binary.LittleEndian.AppendUint64(b, s.maxID)
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (counterSnap) Release() {}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return counterSnap{f.sum, f.n, f.maxID}, nil
}

func (f *counterFSM) Restore(r io.ReadCloser) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(b) != 24 {
		return fmt.Errorf("snapshot of %d bytes", len(b))
	}
	f.mu.Lock()
	f.sum, f.n, f.maxID = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	f.mu.Unlock()
	return nil
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for state
	}
}

// hashicorp/raft runs on *Log (as LogStore and StableStore) through
// elections, replication, compaction and a snapshot install to a follower
// that fell behind — the monotonic reset path — with no guard refusal.
func TestRaftClusterOnLog(t *testing.T) {
	const n = 3
	type member struct {
		r     *raft.Raft
		fsm   *counterFSM
		log   *Log
		trans *raft.InmemTransport
	}
	var ms []*member
	var servers []raft.Server
	for i := 0; i < n; i++ {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("m%d", i)))
		l, err := Open(t.TempDir(), WithSegmentSize(8<<10), RequireStamp())
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, &member{fsm: &counterFSM{}, log: l, trans: trans})
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
		cfg.HeartbeatTimeout = 50 * time.Millisecond
		cfg.ElectionTimeout = 50 * time.Millisecond
		cfg.LeaderLeaseTimeout = 50 * time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
		cfg.SnapshotThreshold = 50
		cfg.TrailingLogs = 10
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
		r, err := raft.NewRaft(cfg, m.fsm, m.log, m.log, raft.NewInmemSnapshotStore(), m.trans)
		if err != nil {
			t.Fatal(err)
		}
		m.r = r
		m.log.SetCommitFloor(func() uint64 { return max(r.CommitIndex(), r.AppliedIndex()) })
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
	waitFor(t, 5*time.Second, "a leader", func() bool { return leader() != nil })
	var want, id uint64
	apply := func(k int) {
		for i := 0; i < k; i++ {
			v := uint64(i + 1)
			id++
			e := raft.Log{Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, id), v)}
			segment.Stamp(&e)
			var err error
			for attempt := 0; attempt < 50; attempt++ {
				l := leader()
				if l == nil {
					waitFor(t, 5*time.Second, "a leader", func() bool { return leader() != nil })
					continue
				}
				if err = l.r.ApplyLog(e, time.Second).Error(); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			want += v
		}
	}
	apply(100)
	// Cut a follower off, let the others compact past it, reconnect.
	var lag *member
	for _, m := range ms {
		if m != leader() {
			lag = m
			break
		}
	}
	lead := leader()
	for _, m := range ms {
		if m != lag {
			m.trans.Disconnect(lag.trans.LocalAddr())
			lag.trans.Disconnect(m.trans.LocalAddr())
		}
	}
	waitFor(t, 5*time.Second, "a leader among the two", func() bool { l := leader(); return l != nil && l != lag })
	apply(200)
	for _, m := range ms {
		if m != lag {
			if err := m.r.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ld *member
	waitFor(t, 5*time.Second, "a leader among the two after the snapshots", func() bool { ld = leader(); return ld != nil && ld != lag })
	first, _ := ld.log.FirstIndex()
	lagLast, _ := lag.log.LastIndex()
	if first <= lagLast+1 {
		t.Fatalf("leader log starts at %d; the lagging member has %d: no snapshot install would happen", first, lagLast)
	}
	_ = lead
	for _, m := range ms {
		if m != lag {
			m.trans.Connect(lag.trans.LocalAddr(), lag.trans)
			lag.trans.Connect(m.trans.LocalAddr(), m.trans)
		}
	}
	apply(20)
	waitFor(t, 10*time.Second, "every member to converge", func() bool {
		for _, m := range ms {
			if sum, _ := m.fsm.state(); sum != want {
				return false
			}
		}
		return true
	})
	// The lagging member was reset by the snapshot install and continued
	// contiguously; its log verifies entry by entry.
	for _, m := range ms {
		f, _ := m.log.FirstIndex()
		l, _ := m.log.LastIndex()
		for i := f; i <= l; i++ {
			var e raft.Log
			if err := m.log.GetLog(i, &e); err != nil {
				t.Fatalf("member %s index %d: %v", m.trans.LocalAddr(), i, err)
			}
		}
	}
}
