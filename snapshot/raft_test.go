package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// counterFSM adds each command (a big-endian uint64) to a counter.
type counterFSM struct {
	mu       sync.Mutex
	n        uint64
	restores int
}

var _ raft.FSM = (*counterFSM)(nil)

func (f *counterFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.Data) == 8 {
		f.n += binary.BigEndian.Uint64(l.Data)
	}
	return f.n
}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return counterSnapshot(f.n), nil
}

func (f *counterFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) != 8 {
		return fmt.Errorf("counter snapshot is %d bytes", len(b))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n = binary.BigEndian.Uint64(b)
	f.restores++
	return nil
}

func (f *counterFSM) value() (uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.restores
}

type counterSnapshot uint64

func (c counterSnapshot) Persist(sink raft.SnapshotSink) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(c))
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (counterSnapshot) Release() {}

// node is a hashicorp/raft member over a Store, with in-memory logs that
// survive its restart (they are its "disk").
type node struct {
	r     *raft.Raft
	fsm   *counterFSM
	trans *raft.InmemTransport
}

func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 40 // snapshots only when the test asks
	c.SnapshotInterval = time.Hour
	c.TrailingLogs = 0 // compaction removes everything the snapshot covers
	c.Logger = hclog.NewNullLogger()
	return c
}

// startNode starts member id over store and logs; with bootstrap it first
// forms a single-voter cluster of itself.
func startNode(t *testing.T, id raft.ServerID, store *Store, logs *raft.InmemStore, bootstrap bool) (*node, error) {
	t.Helper()
	addr := raft.ServerAddress(string(id) + "-addr")
	_, trans := raft.NewInmemTransport(addr)
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: id, Address: addr}}}
		if err := raft.BootstrapCluster(raftConfig(id), logs, logs, store, trans, cfg); err != nil {
			t.Fatal(err)
		}
	}
	fsm := &counterFSM{}
	r, err := raft.NewRaft(raftConfig(id), fsm, logs, logs, store, trans)
	if err != nil {
		_ = trans.Close()
		return nil, err
	}
	n := &node{r: r, fsm: fsm, trans: trans}
	t.Cleanup(n.stop)
	return n, nil
}

func (n *node) waitLeader(t *testing.T) {
	t.Helper()
	eventually(t, 5*time.Second, "leadership", func() bool { return n.r.State() == raft.Leader })
}

func (n *node) stop() {
	_ = n.r.Shutdown().Error()
	_ = n.trans.Close()
}

func (n *node) add(t *testing.T, v uint64) {
	t.Helper()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	if err := n.r.Apply(b[:], 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestRaftSnapshotAndRestartRestoresFromStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snapshots")
	ev := &events{}
	store, err := Open(dir, WithLogger(hclog.NewNullLogger()), WithEvents(ev.add))
	if err != nil {
		t.Fatal(err)
	}
	logs := raft.NewInmemStore()
	n, err := startNode(t, "n1", store, logs, true)
	if err != nil {
		t.Fatal(err)
	}
	n.waitLeader(t)
	for i := uint64(1); i <= 10; i++ {
		n.add(t, i)
	}
	f := n.r.Snapshot()
	if err := f.Error(); err != nil {
		t.Fatalf("user snapshot: %v", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || len(b) != 8 || binary.BigEndian.Uint64(b) != 55 {
		t.Fatalf("snapshot through raft holds %x (%v), want counter 55", b, err)
	}
	if len(ev.of(Sealed)) != 1 || ev.of(Sealed)[0].Manifest.Index != meta.Index {
		t.Fatalf("Sealed events = %+v", ev.of(Sealed))
	}
	if first, _ := logs.FirstIndex(); first <= meta.Index && first != 0 {
		t.Fatalf("logs not compacted past the snapshot: first index %d, snapshot %d", first, meta.Index)
	}
	n.add(t, 100) // after the snapshot, replayed from the log on restart
	n.stop()

	// Restart over the same directory: raft must restore from this store,
	// then replay the log tail.
	store2, err := Open(dir, WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	n2, err := startNode(t, "n1", store2, logs, false)
	if err != nil {
		t.Fatal(err)
	}
	n2.waitLeader(t)
	if err := n2.r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if v, restores := n2.fsm.value(); v != 155 || restores != 1 {
		t.Fatalf("after restart counter = %d with %d restores, want 155 with 1", v, restores)
	}
}

// Restore verifies before state is replaced: a bit flip in the only
// snapshot makes the restarted node refuse to start rather than restore it.
func TestRaftRestartRefusesFlippedSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snapshots")
	store, err := Open(dir, WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	logs := raft.NewInmemStore()
	n, err := startNode(t, "n1", store, logs, true)
	if err != nil {
		t.Fatal(err)
	}
	n.waitLeader(t)
	n.add(t, 7)
	f := n.r.Snapshot()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	n.stop()

	flipByte(t, filepath.Join(dir, meta.ID, artifactName), 7)
	ev := &events{}
	store2, err := Open(dir, WithLogger(hclog.NewNullLogger()), WithEvents(ev.add))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startNode(t, "n1", store2, logs, false); err == nil {
		t.Fatal("raft started from a snapshot whose artifact differs from its manifest")
	}
	refused := ev.of(Refused)
	if len(refused) != 1 || !errors.Is(refused[0].Err, ErrGateRejected) {
		t.Fatalf("Refused events = %+v", refused)
	}
}

// InstallSnapshot: a member joining after the leader compacted its log gets
// the snapshot streamed into its own Store, where the gate seals it before
// raft restores from it.
func TestRaftInstallSnapshotThroughGate(t *testing.T) {
	leaderStore, err := Open(filepath.Join(t.TempDir(), "a"), WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := startNode(t, "a", leaderStore, raft.NewInmemStore(), true)
	if err != nil {
		t.Fatal(err)
	}
	leader.waitLeader(t)
	for i := uint64(1); i <= 20; i++ {
		leader.add(t, i)
	}
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	leader.add(t, 1000) // in the log after the snapshot

	ev := &events{}
	followerStore, err := Open(filepath.Join(t.TempDir(), "b"), WithLogger(hclog.NewNullLogger()), WithEvents(ev.add))
	if err != nil {
		t.Fatal(err)
	}
	follower, err := startNode(t, "b", followerStore, raft.NewInmemStore(), false)
	if err != nil {
		t.Fatal(err)
	}
	leader.trans.Connect(follower.trans.LocalAddr(), follower.trans)
	follower.trans.Connect(leader.trans.LocalAddr(), leader.trans)
	if err := leader.r.AddVoter("b", follower.trans.LocalAddr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "follower to catch up", func() bool {
		v, _ := follower.fsm.value()
		return v == 1210
	})
	if _, restores := follower.fsm.value(); restores != 1 {
		t.Fatalf("follower restored %d times, want 1 (from the installed snapshot)", restores)
	}
	sealed := ev.of(Sealed)
	if len(sealed) != 1 || sealed[0].Manifest.Size != 8 || len(sealed[0].Manifest.Configuration.Servers) != 1 {
		t.Fatalf("follower Sealed events = %+v", sealed)
	}
}
