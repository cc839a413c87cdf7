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

// node is a single-voter hashicorp/raft node over the store in dir, with
// in-memory logs that survive its restart (they are the "disk").
type node struct {
	r     *raft.Raft
	fsm   *counterFSM
	trans *raft.InmemTransport
}

const nodeAddr = raft.ServerAddress("n1-addr")

func raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = "n1"
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

func startNode(t *testing.T, store *Store, logs *raft.InmemStore, bootstrap bool) (*node, error) {
	t.Helper()
	_, trans := raft.NewInmemTransport(nodeAddr)
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: nodeAddr}}}
		if err := raft.BootstrapCluster(raftConfig(), logs, logs, store, trans, cfg); err != nil {
			t.Fatal(err)
		}
	}
	fsm := &counterFSM{}
	r, err := raft.NewRaft(raftConfig(), fsm, logs, logs, store, trans)
	if err != nil {
		_ = trans.Close()
		return nil, err
	}
	n := &node{r: r, fsm: fsm, trans: trans}
	t.Cleanup(n.stop)
	eventually(t, 5*time.Second, "leadership", func() bool { return r.State() == raft.Leader })
	return n, nil
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
	n, err := startNode(t, store, logs, true)
	if err != nil {
		t.Fatal(err)
	}
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
	n2, err := startNode(t, store2, logs, false)
	if err != nil {
		t.Fatal(err)
	}
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
	n, err := startNode(t, store, logs, true)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := startNode(t, store2, logs, false); err == nil {
		t.Fatal("raft started from a snapshot whose artifact differs from its manifest")
	}
	refused := ev.of(Refused)
	if len(refused) != 1 || !errors.Is(refused[0].Err, ErrGateRejected) {
		t.Fatalf("Refused events = %+v", refused)
	}
}
