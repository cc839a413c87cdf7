package raft

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Snapshot cadence by log bytes (Config.SnapshotLogRatio; issue #31).
//
// hashicorp/raft snapshots when the log holds SnapshotThreshold entries past
// its last snapshot. A snapshot writes the whole state, so with a large
// state the cost of snapshots per entry written grows with the state (at
// 6M jobs a 2.1 GB snapshot every 8192 entries: docs/bench.md). With the
// byte rule on, hashicorp/raft is given a threshold it never reaches
// (neverThreshold; its own timer keeps running and finds nothing to do) and
// the member decides itself (runCadence): every SnapshotInterval, with
// hashicorp/raft's jitter, it asks for a snapshot (raft's user snapshot,
// which runs on raft's snapshot goroutine like its own) when
//
//   - the log holds at least SnapshotThreshold entries past the last
//     snapshot (the floor: a small state snapshots as before), and
//   - the entries applied since that snapshot hold at least
//     SnapshotLogRatio times its size in bytes.
//
// The bytes are counted where entries reach the state machine (adapter:
// every entry's Data, the command with its envelope) and marked at the
// points a snapshot covers (byteMarks): where the state machine's snapshot
// is taken, and where a snapshot is restored (an install, or the one a
// start restores). A restarted member restores its latest snapshot (a mark
// at its index) and replays the log after it through the adapter, so the
// count since the snapshot is rebuilt exactly, without persisting it.

// neverThreshold is hashicorp/raft's SnapshotThreshold while the member
// decides its snapshots itself: raft's check (last index - last snapshot
// index >= threshold) never passes.
const neverThreshold = math.MaxUint64

// maxByteMarks bounds the marks kept: the one at the latest snapshot and
// those taken since (snapshots in flight, or that failed).
const maxByteMarks = 8

// byteMarks counts the data bytes of the entries applied since the member
// started and remembers the count at snapshot points. add and mark run on
// raft's FSM goroutine; since and sealed on any.
type byteMarks struct {
	total atomic.Uint64 // data bytes of every entry handed to the state machine

	mu    sync.Mutex
	marks []byteMark // ascending by index
}

// byteMark is the count of bytes applied (total) when the state machine
// held exactly the entries through index.
type byteMark struct{ index, total uint64 }

func (b *byteMarks) add(logs []*hraft.Log) {
	var n uint64
	for _, l := range logs {
		n += uint64(len(l.Data)) + uint64(len(l.Extensions))
	}
	b.total.Add(n)
}

// mark records the count at index, the state machine's applied index when
// its snapshot is taken. Marks above index (none, unless a restore moved
// the state back) are dropped.
func (b *byteMarks) mark(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := b.marks[:0]
	for _, m := range b.marks {
		if m.index < index {
			keep = append(keep, m)
		}
	}
	b.marks = append(keep, byteMark{index: index, total: b.total.Load()})
	if len(b.marks) > maxByteMarks {
		// Keep the oldest (it may be the latest snapshot's) and the newest.
		b.marks = append(b.marks[:1], b.marks[2:]...)
	}
}

// restored records that the state machine now holds exactly the entries
// through index (a snapshot restored): nothing was applied since.
func (b *byteMarks) restored(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.marks = append(b.marks[:0], byteMark{index: index, total: b.total.Load()})
}

// since returns the bytes applied after the snapshot at index: the count
// now less the count at the latest mark at or below index. A snapshot
// covers the state machine as of its mark (raft's snapshot index can be
// past it by entries the state machine never sees, barriers and no-ops,
// which hold no bytes). ok is false when no mark is known.
func (b *byteMarks) since(index uint64) (n uint64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.marks) - 1; i >= 0; i-- {
		if m := b.marks[i]; m.index <= index {
			return b.total.Load() - m.total, true
		}
	}
	return 0, false
}

// sealed drops the marks below the one that covers the snapshot sealed at
// index: no later snapshot will be counted from them.
func (b *byteMarks) sealed(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.marks) - 1; i > 0; i-- {
		if b.marks[i].index <= index {
			b.marks = append(b.marks[:0], b.marks[i:]...)
			return
		}
	}
}

// snapInfo is the latest snapshot the member sealed (taken or installed),
// or restored at start.
type snapInfo struct {
	index uint64
	size  int64
}

// noteSnapshot records a sealed snapshot as the member's latest unless a
// later one is known.
func (n *Node) noteSnapshot(index uint64, size int64) {
	for {
		cur := n.lastSnap.Load()
		if cur != nil && cur.index > index {
			return
		}
		if n.lastSnap.CompareAndSwap(cur, &snapInfo{index: index, size: size}) {
			break
		}
	}
	n.fsm.bytes.sealed(index)
}

// SnapshotCadence is what a member's snapshot cadence looks at
// (Config.SnapshotLogRatio), from Node.SnapshotCadence.
type SnapshotCadence struct {
	// SnapshotIndex and SnapshotSize are the member's latest snapshot's
	// last index and size in bytes (taken, installed, or restored at start;
	// 0 before any).
	SnapshotIndex uint64 `json:"snapshot_index"`
	SnapshotSize  int64  `json:"snapshot_size"`
	// EntriesSince is how many entries the log holds past SnapshotIndex.
	EntriesSince uint64 `json:"entries_since"`
	// BytesSince is the data bytes of the entries applied since the
	// snapshot. BytesKnown is false when they cannot be told, and
	// BytesSince is then 0: while the state machine has applied nothing
	// past the snapshot's index (a snapshot installed from the leader and
	// not yet restored; or a snapshot whose last entries were barriers or
	// no-ops, which the state machine never sees, until the next command),
	// when nothing is due either; or when the count at the snapshot was
	// lost (not expected: the entry count alone then decides, and the next
	// snapshot counts afresh).
	BytesSince uint64 `json:"bytes_since"`
	BytesKnown bool   `json:"bytes_known"`
	// Taking is whether a snapshot is being taken now (the state
	// machine's snapshot taken, its persist not yet sealed or failed:
	// asked by the cadence, by hand, or for a member's catch-up).
	Taking bool `json:"taking"`
	// Due is whether the next check would ask for a snapshot: none is
	// being taken, EntriesSince reached Config.SnapshotThreshold and
	// (unless the byte rule is off) BytesSince reached
	// Config.SnapshotLogRatio times SnapshotSize. A check while one is
	// taken would be judged against the snapshot before it, and raft would
	// take another as soon as that one sealed: at 10M jobs, 18 s more of a
	// member's CPU and 3.7 GB more written (bench/scale, where a check fell
	// into a snapshot asked by hand).
	Due bool `json:"due"`
	// Checks counts the cadence's checks since the member started (0
	// while the byte rule is off: hashicorp/raft checks itself).
	Checks uint64 `json:"checks"`
}

// SnapshotCadence returns what this member's next automatic snapshot
// waits for.
func (n *Node) SnapshotCadence() SnapshotCadence {
	var c SnapshotCadence
	if s := n.lastSnap.Load(); s != nil {
		c.SnapshotIndex, c.SnapshotSize = s.index, s.size
	}
	if last, err := n.log.LastIndex(); err == nil && last > c.SnapshotIndex {
		c.EntriesSince = last - c.SnapshotIndex
	}
	c.Checks = n.cadenceChecks.Load()
	// An installed snapshot is sealed before the state machine restores it:
	// until then the bytes since it are not known (the marks are older), and
	// a snapshot taken would repeat the one being restored. A state machine
	// that applied nothing past the snapshot has nothing new to snapshot.
	behind := n.fsm.applied.Load() < c.SnapshotIndex
	if !behind {
		c.BytesSince, c.BytesKnown = n.fsm.bytes.since(c.SnapshotIndex)
	}
	c.Taking = n.fsm.taking.Load() > 0
	c.Due = c.EntriesSince >= n.cfg.SnapshotThreshold && !behind && !c.Taking &&
		(n.cfg.SnapshotLogRatio < 0 || !c.BytesKnown ||
			float64(c.BytesSince) >= n.cfg.SnapshotLogRatio*float64(c.SnapshotSize))
	return c
}

// runCadence starts the member's snapshot cadence (the byte rule on), ended
// by Close.
func (n *Node) runCadence() {
	if n.cfg.SnapshotLogRatio < 0 {
		return // hashicorp/raft's own rule, by entries
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			// hashicorp/raft's jitter: the interval plus up to as much again.
			d := n.cfg.SnapshotInterval + rand.N(n.cfg.SnapshotInterval)
			t := time.NewTimer(d)
			select {
			case <-n.closed:
				t.Stop()
				return
			case <-t.C:
			}
			n.cadenceCheck()
		}
	}()
}

// cadenceCheck asks raft for a snapshot when one is due.
func (n *Node) cadenceCheck() {
	c := n.SnapshotCadence()
	n.cadenceChecks.Add(1)
	if !c.Due {
		return
	}
	n.cfg.Logger.Debug("snapshot due", "snapshot_index", c.SnapshotIndex, "snapshot_size", c.SnapshotSize,
		"entries_since", c.EntriesSince, "bytes_since", c.BytesSince)
	err := waitFuture(n.life, n.r.Snapshot())
	switch {
	case err == nil, errors.Is(err, hraft.ErrNothingNewToSnapshot), errors.Is(err, hraft.ErrRaftShutdown), n.isClosed():
	default:
		// hashicorp/raft logs the failure itself at Error ("failed to take
		// snapshot": a configuration change not applied yet, the log
		// failed), as for its own automatic snapshots; the next check tries
		// again.
		n.cfg.Logger.Debug("automatic snapshot failed", "error", err)
	}
}
