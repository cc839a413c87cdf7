package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/raft/seam"
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

// watchStaleLastIndex runs the follower's side until Close: the detector
// (catchup.StaleLastIndex) on every heartbeat tick, debounced by
// catchup.StaleWatch.
func (n *Node) watchStaleLastIndex() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(n.cfg.HeartbeatTimeout)
		defer tick.Stop()
		var w catchup.StaleWatch
		for {
			select {
			case <-n.closed:
				return
			case <-tick.C:
			}
			stale := n.staleLastIndex()
			want := w.Step(time.Now(), stale, 10*n.cfg.ElectionTimeout)
			if want == 0 {
				continue
			}
			addr, id := n.r.LeaderWithID()
			if id == "" || string(id) == n.cfg.ID {
				continue
			}
			n.cfg.Logger.Warn("raft's last index is in neither the log nor the latest snapshot (a snapshot install reset a longer log); asking the leader for a snapshot past it",
				"stale_last_index", stale, "leader", id)
			ctx, cancel := context.WithTimeout(transport.ExpectPeer(n.life, string(id)), 2*n.cfg.ApplyTimeout)
			_, err := n.caller.Call(ctx, string(addr), methodSnapshotPast, n.pastRequest(want))
			cancel()
			if err != nil {
				n.cfg.Logger.Warn("snapshot-past request failed", "stale_last_index", stale, "leader", id, "error", err)
				continue
			}
			w.Asked(time.Now(), stale)
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
	return n.staleLast(n.r)
}

// staleLast is staleLastIndex in any role. Raft's cache is read before the
// log: an append stores its entries before it moves the cache, so a normal
// append is never seen as stale; a conflict truncation is, for the instant
// before its entries are stored.
func (n *Node) staleLast(r *hraft.Raft) uint64 {
	cached := r.LastIndex()
	logLast, err := n.log.LastIndex()
	if err != nil || cached <= logLast {
		return 0 // the common case, without Stats
	}
	st := statsOf(r)
	if logLast, err = n.log.LastIndex(); err != nil {
		return 0
	}
	return catchup.StaleLastIndex(st.LastLogIndex, st.LastLogTerm, logLast, st.LastSnapshotIndex, st.LastSnapshotTerm)
}

// While raft's cached last index is stale, the member cannot vouch for it
// (docs/upstream.md U3). In the matching-tail shape — its entries past the
// snapshot agreed with the leader's before the log was reset — the leader's
// next append has PrevLogEntry = the stale index; raft's check passes on
// the cache, the entries land in the empty log above a hole, and the next
// commit panics ("log not found") when raft applies from the snapshot's
// index + 1. So, at the seam:
//
//   - an AppendEntries whose PrevLogEntry is the stale index is refused
//     (Success false, NoRetryBackoff, LastLog the member's real last index)
//     without raft: the leader walks back, and the repair above (or the
//     install refused as behind, seam_install.go) brings a snapshot past the
//     stale index;
//   - a vote or pre-vote is refused when the candidate's log is less
//     up-to-date than what the member really holds (its log's last entry,
//     or its snapshot). raft itself compares with the cache, which in the
//     matching shape overstates the member's log (a stricter check, safe)
//     but in the divergent shape (a former leader's tail, older term) can
//     understate it: the member would vote for a candidate lacking the
//     committed entries its snapshot holds. Checking both keeps the member
//     a safe voter without taking its vote away, so the others can still
//     elect a leader that will repair it;
//   - it does not campaign (the campaign gate, gates.go): its vote
//     requests would claim the stale entry, and as a leader it would hold
//     neither the entries nor the state it claims.

// refuseStale answers an append or a (pre-)vote that raft must not handle
// while its cached last index is stale, and reports whether it did.
func (n *Node) refuseStale(rpc hraft.RPC) bool {
	r := n.raftNow()
	if r == nil {
		return false
	}
	switch req := rpc.Command.(type) {
	case *hraft.AppendEntriesRequest:
		return req.PrevLogEntry != 0 && n.refuseStaleAppend(r, rpc, req)
	case *hraft.RequestVoteRequest:
		if n.refuseStaleVote(r, req.LastLogIndex, req.LastLogTerm, string(req.ID)) {
			rpc.Respond(&hraft.RequestVoteResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: r.CurrentTerm()}, nil)
			return true
		}
	case *hraft.RequestPreVoteRequest:
		if n.refuseStaleVote(r, req.LastLogIndex, req.LastLogTerm, string(req.ID)) {
			rpc.Respond(&hraft.RequestPreVoteResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: r.CurrentTerm()}, nil)
			return true
		}
	}
	return false
}

// refuseStaleAppend answers an append whose PrevLogEntry is raft's stale
// last index (seam.StaleAppend).
func (n *Node) refuseStaleAppend(r *hraft.Raft, rpc hraft.RPC, req *hraft.AppendEntriesRequest) bool {
	stale := n.staleLast(r)
	if !seam.StaleAppend(stale, req.PrevLogEntry) {
		return false
	}
	realIdx, _ := n.realLast(r)
	n.seam.staleAppends.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "stale_append_refused"}, 1)
	n.cfg.Logger.Named("seam").Warn("append at raft's stale last index refused: the log does not hold that entry",
		"from", string(req.ID), "prev_index", req.PrevLogEntry, "entries", len(req.Entries), "real_last_index", realIdx)
	rpc.Respond(&hraft.AppendEntriesResponse{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: req.ProtocolVersion},
		Term:      r.CurrentTerm(), LastLog: realIdx, NoRetryBackoff: true,
	}, nil)
	return true
}

// refuseStaleVote reports whether a (pre-)vote request must be refused
// because raft's last index is stale and the candidate's log is less
// up-to-date than what the member really holds (seam.StaleVote).
func (n *Node) refuseStaleVote(r *hraft.Raft, candIdx, candTerm uint64, candidate string) bool {
	v := seam.StaleVoteView{Stale: n.staleLast(r), CandIndex: candIdx, CandTerm: candTerm}
	if v.Stale == 0 {
		return false
	}
	v.RealIndex, v.RealTerm = n.realLast(r)
	if !seam.StaleVote(v) {
		return false // raft checks the cache as well
	}
	n.seam.staleVotes.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "stale_vote_refused"}, 1)
	n.cfg.Logger.Named("seam").Warn("vote refused: the candidate's log is behind what this member holds (raft's last index is stale)",
		"candidate", candidate, "candidate_last_index", candIdx, "candidate_last_term", candTerm,
		"real_last_index", v.RealIndex, "real_last_term", v.RealTerm, "stale_last_index", v.Stale)
	return true
}

// realLast is the last entry the member really holds: its log's last entry,
// or raft's latest snapshot when the log is empty or behind it.
func (n *Node) realLast(r *hraft.Raft) (index, term uint64) {
	st := statsOf(r)
	index, term = st.LastSnapshotIndex, st.LastSnapshotTerm
	if last, err := n.log.LastIndex(); err == nil && last > index {
		var e hraft.Log
		if n.log.GetLog(last, &e) == nil {
			return last, e.Term
		}
	}
	return index, term
}

// noCampaign is the campaign gate's predicate (gates.go): no vote requests
// while the member is diverged, its log has failed closed, or raft's last
// index is stale. A member whose log failed (wal.ErrFailed: a write or sync
// error) cannot append even its first entry as leader, yet its log is as up
// to date as anyone's, so it would win elections, fail and step down again
// and again, each vote it won restarting the healthy members' timers.
func (n *Node) noCampaign() bool {
	v := seam.CampaignView{Diverged: n.div.is(), LogFailed: n.log.Failure() != ""}
	if r := n.raftNow(); r != nil && !v.Diverged && !v.LogFailed {
		v.Stale = n.staleLast(r)
	}
	switch seam.Campaign(v) {
	case seam.CampaignOK:
		return false
	case seam.CampaignStale:
		n.seam.campaigns.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "stale_campaign_refused"}, 1)
	}
	return true
}

// pastRequest encodes a snapshot-past request: the index, then the asking
// member's ID.
//
//	+-----------------+-----------+
//	| want u64 (LE)   | member ID |
//	+-----------------+-----------+
func (n *Node) pastRequest(want uint64) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, want), n.cfg.ID...)
}

// handleSnapshotPast is the leader's side: move the log to at least the
// requested index with barriers (batched), then take a snapshot. The
// request is bounded (catchup.CheckSnapshotPast): the asking member must be
// in the configuration (under TLS, the one its certificate names), may ask
// only for what its own progress report shows (its raft last index — the
// stale one — or its floor, plus one), and is granted at most one per
// snapshotPastInterval.
func (n *Node) handleSnapshotPast(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) <= 8 {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "index and member id required"}
	}
	want, from := binary.LittleEndian.Uint64(req), string(req[8:])
	if peer, ok := transport.PeerID(ctx); ok && peer != from {
		return nil, &transport.RemoteError{Code: "jr.forbidden", Message: "the request names another member than the caller's certificate"}
	}
	if n.r.State() != hraft.Leader {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: "not the leader"}
	}
	addr, member := n.memberAddr(from)
	var proven uint64
	if member {
		pctx, cancel := context.WithTimeout(ctx, n.cfg.ElectionTimeout)
		rep, err := n.progressOf(transport.ExpectPeer(pctx, from), addr)
		cancel()
		if err != nil {
			return nil, &transport.RemoteError{Code: "jr.unavailable", Message: "cannot read the member's progress: " + err.Error()}
		}
		proven = max(rep.LastIndex, rep.Floor, rep.PersistedFloor)
	}
	n.pastMu.Lock()
	now := time.Now()
	barriers, err := catchup.CheckSnapshotPast(catchup.PastRequest{
		Want: want, LeaderLast: n.r.LastIndex(), Member: member, Proven: proven,
		Now: now, LastGranted: n.pastGranted[from], MinInterval: snapshotPastInterval * n.cfg.ElectionTimeout, Max: maxSnapshotPast,
	})
	if err == nil {
		n.pastGranted[from] = now
	}
	n.pastMu.Unlock()
	if err != nil {
		n.cfg.Logger.Warn("snapshot-past request refused", "from", from, "want", want, "proven", proven, "error", err)
		return nil, &transport.RemoteError{Code: "jr.refused", Message: err.Error()}
	}
	n.cfg.Logger.Info("snapshot-past request granted", "from", from, "want", want, "barriers", barriers)
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
	n.cfg.Logger.Info("snapshot taken past a follower's stale last index", "index", want, "from", from)
	return nil, nil
}

// snapshotPastInterval is how many election timeouts apart one member's
// snapshot-past requests are granted.
const snapshotPastInterval = 2

// memberAddr returns the address of member id in the latest configuration.
func (n *Node) memberAddr(id string) (string, bool) {
	f := n.r.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return string(s.Address), true
		}
	}
	return "", false
}
