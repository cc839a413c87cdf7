package raft_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// cadenceCluster is a one-member cluster snapshotting by the cadence under
// test: a floor of 16 entries, checked every 20 ms (plus jitter).
func cadenceCluster(t *testing.T, ratio float64) *clustertest.NodeCluster {
	return clustertest.StartNodes(t, 1, nil, func(cfg *raft.Config) {
		cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotLogRatio = 16, 20*time.Millisecond, ratio
	})
}

// proposeSized proposes key=value with a value of size bytes and returns
// the entry's index and the command's length. The cadence counts an
// entry's data and extensions as raft stores them: the command, the
// envelope the leader puts it in and the log's stamp, a few bytes more.
func proposeSized(t *testing.T, c *clustertest.NodeCluster, key string, fill byte, size int) (uint64, uint64) {
	t.Helper()
	cmd := key + "=" + strings.Repeat(string(fill), size)
	res, err := c.Propose(0, cmd, wait)
	if err != nil {
		t.Fatalf("propose %s: %v", key, err)
	}
	return res.Index, uint64(len(cmd))
}

// cadenceState writes a state of about 256 KiB (32 keys of 8 KiB) and
// snapshots it by hand: the returned cadence is at that snapshot.
func cadenceState(t *testing.T, c *clustertest.NodeCluster) raft.SnapshotCadence {
	t.Helper()
	for k := 0; k < 32; k++ {
		proposeSized(t, c, fmt.Sprintf("big%02d", k), 'a', 8<<10)
	}
	n := c.Nodes[0]
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	last := n.Status().LastIndex
	var cad raft.SnapshotCadence
	clustertest.WaitFor(t, wait, "the snapshot taken by hand to be the cadence's latest", func() bool {
		cad = n.SnapshotCadence()
		return cad.SnapshotIndex == last
	})
	if cad.SnapshotSize < 32*(8<<10) || cad.EntriesSince != 0 || !cad.BytesKnown || cad.BytesSince != 0 || cad.Due {
		t.Fatalf("cadence right after the snapshot of 256 KiB: %+v", cad)
	}
	return cad
}

// waitChecks waits until the cadence has checked at least k more times, or
// until a snapshot past the one at index was taken.
func waitChecks(t *testing.T, n *raft.Node, k, index uint64) raft.SnapshotCadence {
	t.Helper()
	from := n.SnapshotCadence().Checks
	var cad raft.SnapshotCadence
	clustertest.WaitFor(t, wait, fmt.Sprintf("%d cadence checks", k), func() bool {
		cad = n.SnapshotCadence()
		return cad.Checks >= from+k || cad.SnapshotIndex != index
	})
	return cad
}

// A member snapshots when the log written since its last snapshot reaches
// SnapshotLogRatio times that snapshot's size, not at SnapshotThreshold
// entries: the cost of snapshots per byte written stays the same whatever
// the state's size (issue #31). The count since the snapshot survives a
// restart (the replay counts again). With the byte rule off, the entry
// threshold alone triggers, as before.
func TestSnapshotCadenceByLogBytes(t *testing.T) {
	c := cadenceCluster(t, 0.5)
	c.WaitLeader(wait)
	snap := cadenceState(t, c)
	due := uint64(math.Ceil(0.5 * float64(snap.SnapshotSize)))

	// 64 small entries, four times the entry floor, far below half the
	// snapshot's size: no snapshot.
	var cmds uint64
	for k := 0; k < 64; k++ {
		_, b := proposeSized(t, c, "small", 'b', 100)
		cmds += b
	}
	cad := waitChecks(t, c.Nodes[0], 5, snap.SnapshotIndex)
	if cad.SnapshotIndex != snap.SnapshotIndex {
		t.Fatalf("snapshot at %d after %d entries of %d bytes, under half the snapshot's %d bytes: %+v",
			cad.SnapshotIndex, cad.EntriesSince, cad.BytesSince, snap.SnapshotSize, cad)
	}
	// Every entry counts its command and the same few bytes more.
	per := (cad.BytesSince - cmds) / 64
	if cad.EntriesSince < 64 || !cad.BytesKnown || cad.BytesSince < cmds || per == 0 || per > 64 || cmds+64*per != cad.BytesSince || cad.Due {
		t.Fatalf("cadence after 64 commands of %d bytes in all: %+v", cmds, cad)
	}
	written := cad.BytesSince
	if written >= due {
		t.Fatalf("test setup: %d bytes written reach the %d due", written, due)
	}

	// A restart counts the bytes since the snapshot again as it replays
	// the log after it.
	c.StopMember(0)
	c.StartMember(0)
	c.WaitLeader(wait)
	n := c.Nodes[0]
	clustertest.WaitFor(t, wait, "the restarted member to apply its log", func() bool {
		s := n.Status()
		return s.AppliedIndex >= s.CommitIndex && s.AppliedIndex >= snap.SnapshotIndex+64
	})
	cad = waitChecks(t, n, 3, snap.SnapshotIndex)
	if cad.SnapshotIndex != snap.SnapshotIndex || cad.SnapshotSize != snap.SnapshotSize || !cad.BytesKnown || cad.BytesSince != written || cad.Due {
		t.Fatalf("after a restart: %+v, want the snapshot at %d of %d bytes and %d bytes since", cad, snap.SnapshotIndex, snap.SnapshotSize, written)
	}

	// Overwrites of 8 KiB (the state keeps its size) pass half the
	// snapshot's size: a snapshot, at or past the entry that crossed it.
	var crossed uint64
	for k := 0; crossed == 0; k++ {
		idx, b := proposeSized(t, c, fmt.Sprintf("big%02d", k%32), 'c', 8<<10)
		if written += b + per; written >= due {
			crossed = idx
		}
	}
	clustertest.WaitFor(t, wait, "a snapshot once the log since the last passed half its size", func() bool {
		cad = n.SnapshotCadence()
		return cad.SnapshotIndex > snap.SnapshotIndex
	})
	if cad.SnapshotIndex < crossed {
		t.Fatalf("snapshot at %d, before the entry at %d that brought the log since the last to half its size", cad.SnapshotIndex, crossed)
	}

	// The byte rule off: the entry floor alone decides.
	off := cadenceCluster(t, raft.SnapshotLogRatioOff)
	off.WaitLeader(wait)
	snap = cadenceState(t, off)
	for k := 0; k < 32; k++ {
		proposeSized(t, off, "small", 'b', 100)
	}
	clustertest.WaitFor(t, wait, "a snapshot after 32 small entries with the byte rule off", func() bool {
		cad = off.Nodes[0].SnapshotCadence()
		return cad.SnapshotIndex > snap.SnapshotIndex
	})
	if cad.SnapshotIndex < snap.SnapshotIndex+16 {
		t.Fatalf("snapshot at %d, fewer than 16 entries past the one at %d", cad.SnapshotIndex, snap.SnapshotIndex)
	}
}

// SnapshotLogRatio values that mean nothing are refused with
// ErrInvalidConfig; a negative one turns the byte rule off.
func TestSnapshotLogRatioValidation(t *testing.T) {
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), raft.MaxSnapshotLogRatio * 2} {
		cfg := raft.Config{ID: "m0", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", SnapshotLogRatio: r}
		n, err := raft.Open(cfg, clustertest.NewKV())
		if err == nil {
			n.Close()
		}
		if !errors.Is(err, raft.ErrInvalidConfig) {
			t.Errorf("SnapshotLogRatio %v: Open answered %v, want ErrInvalidConfig", r, err)
		}
	}
}

// BenchmarkSnapshotCadence measures what the snapshot cadence costs per
// byte written at two state sizes: a one-member cluster holds a state of
// 1 or 8 MiB (keys of 16 KiB), then 16 MiB of overwrites (the state keeps
// its size) are written, paced at 2 MB/s so that the checks (every 10–20
// ms) and the snapshots keep up with the rule; reported are the snapshots taken per MiB written
// and the snapshot bytes written per byte of log. With the byte rule
// (ratio 0.5) both stay near 1/ratio = 2 bytes per byte, whatever the
// state; by entries alone (every 16 entries, 256 KiB here) the snapshot
// bytes per byte written grow with the state. Run with -benchtime=1x.
func BenchmarkSnapshotCadence(b *testing.B) {
	const entry, written = 16 << 10, 16 << 20
	for _, state := range []int{1 << 20, 8 << 20} {
		for _, rule := range []struct {
			name  string
			ratio float64
		}{{"bytes", raft.DefaultSnapshotLogRatio}, {"entries", raft.SnapshotLogRatioOff}} {
			b.Run(fmt.Sprintf("state=%dMiB/%s", state>>20, rule.name), func(b *testing.B) {
				for range b.N {
					c := clustertest.StartNodes(b, 1, nil, func(cfg *raft.Config) {
						cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotLogRatio = 16, 10*time.Millisecond, rule.ratio
					})
					c.WaitLeader(wait)
					keys := state / entry
					value := strings.Repeat("v", entry)
					for k := range keys {
						if _, err := c.Propose(0, fmt.Sprintf("k%04d=%s", k, value), wait); err != nil {
							b.Fatal(err)
						}
					}
					n := c.Nodes[0]
					if err := n.Raft().Snapshot().Error(); err != nil {
						b.Fatal(err)
					}
					events, cancel := n.Events(4096)
					var snaps, snapBytes int64
					done := make(chan struct{})
					go func() {
						defer close(done)
						for e := range events {
							if e.Kind == raft.EventSnapshotSealed {
								snaps++
								snapBytes += n.SnapshotCadence().SnapshotSize
							}
						}
					}()
					b.ResetTimer()
					pace := time.NewTicker(8 * time.Millisecond)
					for k := range written / entry {
						<-pace.C
						if _, err := c.Propose(0, fmt.Sprintf("k%04d=%s", k%keys, value), wait); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					pace.Stop()
					cancel()
					<-done
					b.ReportMetric(float64(snaps)/float64(written>>20), "snapshots/MiB")
					b.ReportMetric(float64(snapBytes)/float64(written), "snapshot-B/B")
					c.Close()
				}
			})
		}
	}
}

// slowKV is a KV whose snapshots' Persist waits for hold to close, and
// that counts them.
type slowKV struct {
	*clustertest.KV
	hold     chan struct{}
	persists atomic.Int32
}

type slowSnap struct {
	raft.Snapshot
	kv *slowKV
}

func (s *slowKV) Snapshot() (raft.Snapshot, error) {
	sn, err := s.KV.Snapshot()
	return &slowSnap{Snapshot: sn, kv: s}, err
}

func (s *slowSnap) Persist(w io.Writer) error {
	s.kv.persists.Add(1)
	<-s.kv.hold
	return s.Snapshot.Persist(w)
}

// While a snapshot is being taken (here one asked by hand, its persist
// held), the cadence asks for no other, though by the snapshot before it
// one is due: judged against that one, raft took a second snapshot as soon
// as the first sealed (a 10M-job member's whole state written twice in a
// row). Once the first seals, the bytes since it decide, as ever.
func TestSnapshotCadenceAsksForNoneWhileOneIsTaken(t *testing.T) {
	kv := &slowKV{KV: clustertest.NewKV(), hold: make(chan struct{})}
	cfg := clustertest.FastConfig(t, "solo", t.TempDir(), clustertest.FreeAddr(t))
	cfg.Bootstrap = true
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotLogRatio = 16, 20*time.Millisecond, 0.5
	n := clustertest.OpenNew(t, cfg, kv)
	var release sync.Once
	unhold := func() { release.Do(func() { close(kv.hold) }) }
	t.Cleanup(unhold) // before the member's close (cleanups run last first): a failure never leaves a persist held
	propose := func(key string, size int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := n.Propose(ctx, []byte(key+"="+strings.Repeat("a", size))); err != nil {
			t.Fatal(err)
		}
	}
	// Fewer entries than the floor: no snapshot of the cadence's.
	for k := range 8 {
		propose(fmt.Sprint("big", k), 8<<10)
	}
	byHand := make(chan error, 1)
	go func() { byHand <- n.Raft().Snapshot().Error() }()
	clustertest.WaitFor(t, wait, "the snapshot by hand to start its persist", func() bool { return kv.persists.Load() == 1 })
	// Entries past the floor while it persists: by the snapshot before
	// it (none), a snapshot is due.
	for k := range 32 {
		propose(fmt.Sprint("small", k), 100)
	}
	cad := waitChecks(t, n, 10, 0)
	if !cad.Taking || cad.Due || cad.EntriesSince < 16 {
		t.Fatalf("cadence while a snapshot is taken: %+v, want taking and not due", cad)
	}
	unhold()
	if err := <-byHand; err != nil {
		t.Fatal(err)
	}
	cad = n.SnapshotCadence()
	first := cad.SnapshotIndex
	cad = waitChecks(t, n, 10, first)
	if cad.SnapshotIndex != first || kv.persists.Load() != 1 || cad.Taking || cad.Due {
		t.Fatalf("after the snapshot by hand sealed at %d: %+v, %d persists; want no other", first, cad, kv.persists.Load())
	}
}
