package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
)

// Figure 13 step 6 at the reconcile seam (docs/upstream.md U2).
//
// hashicorp/raft v1.7.3 installs every InstallSnapshot it is sent in the
// current term: it restores the state machine, moves its applied index to
// the snapshot's, replaces the latest and the committed configuration and,
// on a monotonic log store (wal.Log), resets the whole log. It never checks
// whether the member already holds the snapshot's last entry. A snapshot
// older than what the member committed (a duplicated or reordered install,
// a crafted one, or the older snapshot a leader sends when its store skips
// a newest one whose manifest fails verification) makes the state machine
// go back, deletes committed entries the member acknowledged, and leaves
// raft's cached last index above the empty log, where the next append
// panics ("log not found", U3).
//
// The Raft paper's Figure 13, step 6: if the member's log holds an entry
// with the snapshot's last index and term, it keeps its log and replies;
// only otherwise does it discard the log and reset the state machine. The
// seam answers such a request itself, without raft (seam.Install):
//
//   - The snapshot ends at or below the member's commit floor (max of
//     raft's commit index, the applied index and the floor the wal
//     persisted), or it ends at an entry the member's log holds with the
//     same term. Then the member already has what the snapshot holds.
//   - If the member holds a different term at that committed index (its
//     log, or its latest snapshot), the sender and this member disagree
//     about a committed entry: the request is refused loudly and nothing
//     changes. The member is diverged (diverged.go: Status.Diverged, one
//     EventDiverged, the gauge; no campaign, no snapshot until re-seeded),
//     every refusal is an ERROR line and counted.
//   - In the sender's term, it is answered Success without restoring, when
//     raft's next append from the snapshot's index will pass its log
//     check: the log holds that entry, or it is raft's last entry (and
//     raft's last index is not stale). Otherwise — the entry was compacted
//     into a newer local snapshot — a Success would have the leader send
//     appends from an index raft cannot find, and send the same snapshot
//     again, for ever: the seam refuses it and asks the sender for a
//     snapshot past its floor (jr.snapshot.past), which raft then installs.
//   - In a higher term than the member's, it is refused (Success false, the
//     member's term): raft has not adopted that term yet, and handing the
//     request to raft to adopt it would also install the snapshot. The
//     leader's heartbeats, which carry its term and go through raft's main
//     loop when the term differs (heartbeatFastPath), make raft adopt it;
//     the leader retries the install after its failure backoff and the
//     retry is answered as above. Refusing changes nothing, so it is safe;
//     the leader's heartbeats do not depend on its replication, so it
//     converges within a heartbeat interval and a backoff.
//   - In a lower term, raft refuses it as it does any stale RPC.
//
// The term is read before and after the lookups: if it moved in between,
// the request is refused (as in a higher term), so an answer never claims
// an entry in a term in which raft may already have truncated it.
// Everything else — a snapshot past the floor that the log does not hold
// with its term — goes to raft, which installs it. The wal's reset gate
// (SetResetBound) is the defence in depth behind this: raft's log reset
// after an install below the floor is refused.

// interceptInstall applies Figure 13 step 6 (seam.Install) to an
// InstallSnapshot request. It returns false to let raft handle it.
func (n *Node) interceptInstall(rpc hraft.RPC, req *hraft.InstallSnapshotRequest) bool {
	r := n.raftNow()
	if r == nil {
		return false
	}
	v, stale := n.installView(r, req)
	act := seam.Install(v)
	if act == seam.InstallPass {
		if !seam.NeedsFloorCheck(v, n.div.is()) {
			return false // the snapshot gate refuses it (gates.go); raft refuses a stale term
		}
		verdict, pv := n.checkPastFloor(req, v)
		if act = seam.AfterCheck(verdict); act == seam.InstallPass {
			n.countPastFloor(verdict, req, pv)
			return false
		}
		if act == seam.InstallDiverged {
			v.AtFloor, v.SenderAtFloor, v.HeldTerm = true, pv.Sender, pv.Own
		}
	}
	if t := r.CurrentTerm(); t != v.CurTerm {
		if act = seam.Recheck(act, v.CurTerm, t); act == seam.InstallDefer {
			v.CurTerm = t
		}
	}
	// The stream is drained off the seam's goroutine: other RPCs keep
	// flowing to raft while the sender writes it.
	go n.finishInstall(rpc, req, act, v, stale)
	return true
}

// installView reads what seam.Install needs: the term first, then the
// floor, the log and raft's snapshot and last entry.
func (n *Node) installView(r *hraft.Raft, req *hraft.InstallSnapshotRequest) (v seam.InstallView, stale uint64) {
	v = seam.InstallView{ReqTerm: req.Term, Index: req.LastLogIndex, Term: req.LastLogTerm,
		CurTerm: r.CurrentTerm(), Floor: n.log.Floor()}
	first, ferr := n.log.FirstIndex()
	last, lerr := n.log.LastIndex()
	if ferr != nil || lerr != nil || (v.Index > v.Floor && v.Index > last) {
		return v, 0 // nothing the member holds: an ordinary install
	}
	if first != 0 && v.Index >= first && v.Index <= last {
		var e hraft.Log
		if err := n.log.GetLog(v.Index, &e); err == nil {
			v.HeldTerm, v.InLog = e.Term, e.Term == v.Term
		} else if !errors.Is(err, hraft.ErrLogNotFound) {
			n.cfg.Logger.Named("seam").Warn("install snapshot: cannot read the log at the snapshot's index",
				"index", v.Index, "error", err)
		}
	}
	st := statsOf(r)
	snap, snapTerm := st.LastSnapshotIndex, st.LastSnapshotTerm
	if v.HeldTerm == 0 && snap == v.Index {
		v.HeldTerm = snapTerm
	}
	stale = n.staleLast(r)
	if stale == 0 {
		lastIdx, lastTerm := st.LastLogIndex, st.LastLogTerm
		if lastIdx < snap {
			lastIdx, lastTerm = snap, snapTerm
		}
		v.IsLast = lastIdx == v.Index && lastTerm == v.Term
	}
	return v, stale
}

// finishInstall drains the request's stream (exactly req.Size bytes) and
// answers it as decided.
func (n *Node) finishInstall(rpc hraft.RPC, req *hraft.InstallSnapshotRequest, act seam.InstallAction, v seam.InstallView, stale uint64) {
	resp := &hraft.InstallSnapshotResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: v.CurTerm}
	if err := drainInstall(rpc.Reader, req.Size); err != nil {
		rpc.Respond(resp, err)
		return
	}
	sender := string(req.RPCHeader.ID)
	lg := n.cfg.Logger.Named("seam")
	switch act {
	case seam.InstallAnswer:
		n.seam.answered.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_answered"}, 1)
		lg.Info("install snapshot answered without restoring: the member holds its last entry (Figure 13 step 6)",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor)
		resp.Success = true
		rpc.Respond(resp, nil)
	case seam.InstallDefer:
		n.seam.deferred.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_deferred"}, 1)
		lg.Info("install snapshot refused until raft adopts the sender's term",
			"from", sender, "request_term", v.ReqTerm, "term", v.CurTerm, "index", v.Index, "floor", v.Floor)
		rpc.Respond(resp, nil)
	case seam.InstallBehind:
		n.seam.behind.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_behind"}, 1)
		want := max(v.Floor, stale) + 1
		lg.Warn("install snapshot at or below the commit floor refused: the member cannot continue from its index; asking the sender for a newer snapshot",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor, "stale_last_index", stale, "want", want)
		rpc.Respond(resp, nil)
		n.askSnapshotPast(senderAddr(req), want)
	case seam.InstallUnasked:
		n.seam.unasked.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_unasked"}, 1)
		lg.Warn("install snapshot past the commit floor refused: the sender's term at the floor could not be read",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor)
		rpc.Respond(resp, nil)
	case seam.InstallDiverged:
		n.seam.diverged.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_diverged"}, 1)
		err := fmt.Errorf("%w: %w: snapshot ends at index %d term %d from %q (term %d); this member holds term %d there, at or below its commit floor %d",
			ErrRefusedAtSeam, ErrCommittedDivergence, v.Index, v.Term, sender, v.ReqTerm, v.HeldTerm, v.Floor)
		if v.AtFloor {
			err = fmt.Errorf("%w: %w: snapshot ends at index %d term %d from %q (term %d), past this member's commit floor %d, where the sender held term %d and this member holds term %d",
				ErrRefusedAtSeam, ErrCommittedDivergence, v.Index, v.Term, sender, v.ReqTerm, v.Floor, v.SenderAtFloor, v.HeldTerm)
		}
		n.installDiverged(v, sender, err)
		rpc.Respond(resp, err)
	}
}

// installDiverged makes the member diverged (diverged.go): the sender's
// snapshot and this member disagree about a committed entry, so one of
// them holds a committed entry the other does not. The first one is
// published (EventDiverged with the Divergence, the gauge, an ERROR line);
// every refusal is logged at ERROR, with indexes and terms only.
func (n *Node) installDiverged(v seam.InstallView, sender string, err error) {
	at, why := v.Index, "install snapshot refused: its last entry contradicts an entry this member committed"
	if v.AtFloor {
		at, why = v.Floor, "install snapshot refused: the sender held another term at this member's commit floor"
	}
	cur, first := n.div.record(Divergence{Index: at, LocalTerm: v.HeldTerm, LeaderTerm: v.ReqTerm, Leader: sender, Floor: v.Floor}, time.Now())
	n.cfg.Logger.Named("seam").Error(why,
		"from", sender, "index", v.Index, "snapshot_term", v.Term, "held_term", v.HeldTerm, "floor", v.Floor,
		"sender_floor_term", v.SenderAtFloor, "request_term", v.ReqTerm, "refusals", cur.Refusals)
	if !first {
		return
	}
	gaugeDiverged(n.cfg.ID, true)
	n.cfg.Logger.Error("member diverged: a snapshot contradicts an entry at or below this member's commit floor; "+
		"this member stands for no election and installs no snapshot until it is re-seeded (docs/node.md, \"A diverged member\")",
		"index", cur.Index, "local_term", cur.LocalTerm, "leader", cur.Leader, "leader_term", cur.LeaderTerm, "floor", cur.Floor)
	n.events.publish(Event{Kind: EventDiverged, Time: cur.Since, Leader: cur.Leader, Term: cur.LeaderTerm, Index: cur.Index,
		Err: err, Divergence: &cur})
}

// drainInstall reads exactly size bytes of a snapshot stream and discards
// them (the sender's connection carries the next RPC after them).
func drainInstall(r io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: install snapshot: negative size %d", ErrRefusedAtSeam, size)
	}
	if r == nil {
		if size == 0 {
			return nil
		}
		return fmt.Errorf("%w: install snapshot: no stream for %d bytes", ErrRefusedAtSeam, size)
	}
	got, err := io.CopyN(io.Discard, r, size)
	if err != nil {
		return fmt.Errorf("%w: install snapshot: read %d of %d bytes: %w", ErrRefusedAtSeam, got, size, err)
	}
	return nil
}

// senderAddr is the address of an InstallSnapshot's sender.
func senderAddr(req *hraft.InstallSnapshotRequest) string {
	if len(req.RPCHeader.Addr) > 0 {
		return string(req.RPCHeader.Addr)
	}
	return string(req.Leader) // the network transport encodes a peer as its address
}

// askSnapshotPast asks the member at addr (a leader) for a snapshot past
// want (jr.snapshot.past), in the background, at most once per election
// timeout.
func (n *Node) askSnapshotPast(addr string, want uint64) {
	now := time.Now().UnixNano()
	last := n.seam.askedPast.Load()
	if addr == "" || now-last < int64(n.cfg.ElectionTimeout) || !n.seam.askedPast.CompareAndSwap(last, now) || n.isClosed() {
		return
	}
	// Not in n.wg: this runs from the seam, which may call it while Close
	// waits; the call ends with n.life.
	go func() {
		ctx, cancel := context.WithTimeout(n.life, 2*n.cfg.ApplyTimeout)
		defer cancel()
		if _, err := n.caller.Call(ctx, addr, methodSnapshotPast, n.pastRequest(want)); err != nil {
			n.cfg.Logger.Named("seam").Warn("snapshot-past request failed", "to", addr, "want", want, "error", err)
		}
	}()
}
