package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// A follower stuck behind a stale last index, and its repair.
//
// hashicorp/raft v1.7.3 caches the index and term of the last log entry.
// When a follower installs a snapshot over a monotonic log store (wal.Log),
// it resets the log (removeOldLogs) but keeps that cache. If the follower's
// log reached past the snapshot index — a former leader's divergent,
// uncommitted tail, the hashicorp/raft #697 shape — its last index stays the
// stale tail's: every AppendEntries whose previous index is the snapshot
// index differs from that cached index, is looked up in the now empty log,
// fails, and the leader backs off and sends the snapshot again, forever.
// The cache only heals when an installed snapshot reaches the stale index.
//
// So each follower watches for the impossible state "raft's last index is in
// neither the log nor the latest snapshot" (seen on two consecutive ticks,
// to skip the instant between a suffix truncation and the append that
// follows it) and asks the leader to move its log past that index (barriers)
// and take a snapshot there; the next install carries an index above the
// stale one, after which raft's own checks pass and the follower appends
// normally. Only a log that was reset can be in that state, so the watch
// never fires on a healthy member.
const methodSnapshotPast = "jr.snapshot.past"

// maxSnapshotPast bounds how far past its log a leader is asked to move.
const maxSnapshotPast = 1 << 20

// watchStaleLastIndex runs the follower's side until Close.
func (n *Node) watchStaleLastIndex() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(n.cfg.HeartbeatTimeout)
		defer tick.Stop()
		var seen, asked uint64
		var askedAt time.Time
		for {
			select {
			case <-n.closed:
				return
			case <-tick.C:
			}
			stale := n.staleLastIndex()
			if stale == 0 || stale != seen {
				seen = stale
				continue
			}
			if stale == asked && time.Since(askedAt) < 10*n.cfg.ElectionTimeout {
				continue // the leader is on it: its snapshot has to reach us
			}
			addr, id := n.r.LeaderWithID()
			if id == "" || string(id) == n.cfg.ID {
				continue
			}
			n.cfg.Logger.Warn("raft's last index is in neither the log nor the latest snapshot (a snapshot install reset a longer log); asking the leader for a snapshot past it",
				"stale_last_index", stale, "leader", id)
			ctx, cancel := context.WithTimeout(context.Background(), 2*n.cfg.ApplyTimeout)
			// A snapshot strictly past the stale index: raft prefers its
			// cached last entry over a snapshot at the same index.
			_, err := n.caller.Call(ctx, string(addr), methodSnapshotPast, binary.LittleEndian.AppendUint64(nil, stale+1))
			cancel()
			if err != nil {
				n.cfg.Logger.Warn("snapshot-past request failed", "stale_last_index", stale, "leader", id, "error", err)
				continue
			}
			asked, askedAt = stale, time.Now()
		}
	}()
}

// staleLastIndex returns raft's cached last log index when a follower
// holds that entry in neither its log nor its latest snapshot (same index,
// same term), else 0.
func (n *Node) staleLastIndex() uint64 {
	if n.r.State() != hraft.Follower {
		return 0
	}
	logLast, err := n.log.LastIndex()
	if err != nil || n.r.LastIndex() <= logLast {
		return 0 // the common case, without Stats
	}
	st := n.r.Stats()
	num := func(k string) uint64 { v, _ := strconv.ParseUint(st[k], 10, 64); return v }
	last, lastTerm := num("last_log_index"), num("last_log_term")
	snap, snapTerm := num("last_snapshot_index"), num("last_snapshot_term")
	if last <= logLast || last < snap || (last == snap && lastTerm == snapTerm) {
		return 0
	}
	return last
}

// handleSnapshotPast is the leader's side: move the log to at least the
// requested index with barriers (batched), then take a snapshot.
func (n *Node) handleSnapshotPast(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) != 8 {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "index required"}
	}
	want := binary.LittleEndian.Uint64(req)
	if n.r.State() != hraft.Leader {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: "not the leader"}
	}
	if last := n.r.LastIndex(); want > last && want-last > maxSnapshotPast {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "index too far past the leader's log"}
	}
	for n.r.LastIndex() < want {
		k := min(want-n.r.LastIndex(), 256)
		fs := make([]hraft.Future, k)
		for i := range fs {
			fs[i] = n.r.Barrier(n.cfg.ApplyTimeout)
		}
		for _, f := range fs {
			if err := waitFuture(ctx, f); err != nil {
				return nil, err
			}
		}
	}
	if err := waitFuture(ctx, n.r.Snapshot()); err != nil && !errors.Is(err, hraft.ErrNothingNewToSnapshot) {
		return nil, err
	}
	n.cfg.Logger.Info("snapshot taken past a follower's stale last index", "index", want)
	return nil, nil
}
