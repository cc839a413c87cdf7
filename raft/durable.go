package raft

import (
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
	"github.com/jobraft/jobraft/wal"
)

// The leader writes its log while it replicates (docs/node.md "The
// leader's own write").
//
// hashicorp/raft's leader stores a batch (one write, one fsync) before it
// signals its replicators, so every commit waits for two fsyncs in a row:
// the leader's, then a follower's. The Raft thesis (§10.2.1) lets the
// leader write in parallel with replication, provided it counts itself
// towards a commit only for entries on its own disk. hashicorp/raft counts
// the leader as soon as StoreLogs returns, so the member keeps that rule
// at its seams instead:
//
//   - raft's log store is raftLog: a StoreLogs made outside the handling of
//     an inbound RPC is the leader's own dispatch (raft's main loop makes
//     both, one at a time; the seam counts the RPCs it has handed raft and
//     not seen answered), and is stored deferred (wal.Log.StoreLogsDeferred:
//     in the log at once, durable when wal.Log.Durable says). A follower's
//     StoreLogs — always made while raft handles an append — stays
//     synchronous, so its answer to the leader still means "on my disk".
//     When in doubt (an RPC handed over while the leader dispatches) the
//     store is synchronous.
//   - the first entry of the leader's term (raft's no-op) is stored
//     synchronously: raft commits an entry of an earlier term only through
//     an entry of the current term (the Raft paper's Figure 8), and counts
//     the leader for it as soon as its store returns, so everything raft
//     reckons committed from before the term is then on the leader's disk
//     too — whatever raft does on that count (apply, the commit index it
//     sends, a barrier, the next membership change) stands on a majority
//     of disks, and a power loss cannot take it back;
//   - an entry is applied only once it is durable here (the FSM gate,
//     adapter.gate), so no client is answered on the strength of a copy
//     only in memory; a configuration entry is stored synchronously, since
//     raft acts on its commit without the state machine;
//   - the commit index this member sends in its appends is bounded by its
//     durable index (seam.Hooks.CommitBound), so followers never
//     apply an entry the leader holds only in memory; and the commit floor
//     the guard persists counts raft's commit index only as far as it is
//     durable here.
//
// Together: an entry reaches a state machine only when it is durable on
// the leader and, by raft's count of its followers' answers, on enough
// followers to make a majority with it — what Raft requires of a commit.

// raftLog is the log store hashicorp/raft writes: the member's wal.Log,
// with the leader's own appends deferred.
type raftLog struct {
	*wal.Log
	inRaft *atomic.Int64 // RPCs handed to raft's main loop, not yet answered
}

// StoreLogs implements raft.LogStore: synchronous while raft handles an
// RPC, or when the batch holds a configuration entry or the no-op that
// opens a leader's term; deferred otherwise.
//
// hashicorp/raft counts the leader as soon as this returns. For a
// configuration entry, raft decides it is committed — and takes the next
// membership change — from that count, not from the state machine the gate
// holds. For the no-op, the count is what commits every entry of earlier
// terms (raft's commitment starts at the term's first index), and the gate
// holds back only the entries the state machine is handed, of which the
// no-op is none: an earlier-term entry below it would be applied, sent as
// committed, persisted as the floor and counted by a read's barrier on a
// no-op only in memory, and lost with it at a power loss
// (TestFigure8PowerLossNeverAppliesAnEarlierTermEntry). Both are therefore
// on the leader's disk, with everything before them, before raft counts
// them: one fsync per term and per membership change.
func (l raftLog) StoreLogs(entries []*hraft.Log) error {
	if l.inRaft.Load() > 0 || mustSync(entries) {
		return l.Log.StoreLogs(entries)
	}
	return l.Log.StoreLogsDeferred(entries)
}

// mustSync reports whether a leader's batch holds an entry raft must not
// count from memory: a configuration entry or a term's no-op.
func mustSync(entries []*hraft.Log) bool {
	for _, e := range entries {
		if e.Type == hraft.LogConfiguration || e.Type == hraft.LogNoop {
			return true
		}
	}
	return false
}

// StoreLog implements raft.LogStore.
func (l raftLog) StoreLog(e *hraft.Log) error { return l.StoreLogs([]*hraft.Log{e}) }

// inRaftHook is the seam's InRaft hook: it counts the RPCs raft is
// handling.
func (n *Node) inRaftHook(begin bool) {
	if begin {
		n.seam.inRaft.Add(1)
	} else {
		n.seam.inRaft.Add(-1)
	}
}

// durableCommit is raft's commit index as far as this member's log is
// durable: what it may tell followers is committed and persist as its
// commit floor.
func (n *Node) durableCommit(r *hraft.Raft) uint64 {
	return seam.Bound(r.CommitIndex(), n.log.Durable())
}

// commitBound is the seam's CommitBound hook: the commit index this member
// may send in its appends (durableCommit; before raft runs, the durable
// index).
func (n *Node) commitBound() uint64 {
	if r := n.raftNow(); r != nil {
		return n.durableCommit(r)
	}
	return n.log.Durable()
}

// awaitDurable is the FSM gate: it returns true once the log is durable
// through index, false when the log failed first (a failed log never
// becomes durable). It waits through Close: the log's writer runs until the
// log closes, after raft has shut down, so an entry raft hands the state
// machine is either applied or the log has failed — never skipped while a
// later one is applied (the adapter refuses everything after a false).
func (n *Node) awaitDurable(index uint64) bool {
	if n.log.Durable() >= index {
		return true // the common case: no lock, no channel
	}
	for {
		ch := n.log.DurableChanged()
		if n.log.Durable() >= index {
			return true
		}
		if n.log.Failure() != "" {
			return false
		}
		<-ch
	}
}

// stepDownOnFailedLog makes a leader whose log failed step down. Its own
// appends are deferred, so the failure may be its writer's, which raft
// does not see: hashicorp/raft steps down when a StoreLogs fails, so a
// barrier makes it try one (it fails at once: the log refuses every write
// once failed). First it lets its replicators finish, until raft's commit
// index reaches its last index (a majority's followers then hold every
// entry it appended) or an election timeout passes: raft's last index
// still counts the entries its disk never took, and a member votes only
// for a log as long as its own, so a follower missing them could never be
// elected with this member's vote — with one member down, no leader at
// all. Called by the log's failure report; it must not wait.
func (n *Node) stepDownOnFailedLog() {
	r := n.raftNow()
	if r == nil || r.State() != hraft.Leader {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		deadline := time.After(n.cfg.ElectionTimeout)
		for r.State() == hraft.Leader && r.CommitIndex() < r.LastIndex() {
			select {
			case <-deadline:
			case <-n.closed:
				return
			case <-time.After(n.cfg.HeartbeatTimeout / 20): // polling raft's commit index
				continue
			}
			break
		}
		// A barrier's future is not answered when raft shuts down first.
		_ = waitFuture(n.closedCtx(), r.Barrier(n.cfg.ApplyTimeout)) // fails: the log is failed
	}()
}
