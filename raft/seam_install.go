package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
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
// seam answers such a request itself, without raft (decideInstall):
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

// installAction is what the seam does with an InstallSnapshot request.
type installAction int

const (
	installPass     installAction = iota // hand it to raft
	installAnswer                        // Success without restoring (Figure 13 step 6)
	installDefer                         // refuse: raft has not adopted the sender's higher term yet
	installBehind                        // refuse and ask the sender for a snapshot past the floor
	installDiverged                      // refuse loudly: another term at a committed index
	installUnasked                       // refuse: past the floor, and the sender's term index could not be read
)

func (a installAction) String() string {
	switch a {
	case installAnswer:
		return "answered"
	case installDefer:
		return "deferred"
	case installBehind:
		return "behind"
	case installDiverged:
		return "diverged"
	case installUnasked:
		return "unasked"
	}
	return "pass"
}

// installView is what the seam knows when it decides, read without raft's
// main loop.
type installView struct {
	ReqTerm uint64 // the sender's term
	Index   uint64 // the snapshot's last index
	Term    uint64 // the snapshot's last term
	CurTerm uint64 // raft's current term
	Floor   uint64 // the commit floor: max(commit, applied, persisted floor)
	// HeldTerm is the term this member holds at Index, in its log or as its
	// latest snapshot (0: unknown, e.g. compacted).
	HeldTerm uint64
	// InLog: the log holds (Index, Term).
	InLog bool
	// IsLast: (Index, Term) is raft's last entry, and raft's cached last
	// index is not stale (stale.go).
	IsLast bool
	// AtFloor: the floor check (seam_terms.go) found the sender holding
	// term SenderAtFloor at Floor, where this member holds HeldTerm.
	AtFloor       bool
	SenderAtFloor uint64
}

// decideInstall is the seam's rule for an InstallSnapshot request (see
// the comment above). It is a function of its input only.
func decideInstall(v installView) installAction {
	if v.Index > v.Floor {
		if !v.InLog {
			return installPass // an ordinary install
		}
	} else if v.HeldTerm != 0 && v.HeldTerm != v.Term {
		return installDiverged
	}
	switch {
	case v.ReqTerm < v.CurTerm:
		return installPass // raft refuses an older term without installing
	case v.ReqTerm > v.CurTerm:
		return installDefer
	case v.InLog || v.IsLast:
		return installAnswer
	default:
		return installBehind
	}
}

// installSeam counts the seam's decisions on installs and on a stale last
// index (stale.go), and holds the wal's reset bound.
type installSeam struct {
	answered, deferred, behind, diverged atomic.Uint64
	// Installs past the floor (seam_terms.go): checked at the floor,
	// passed unchecked, refused because the sender could not be asked.
	verified, unverified, unasked       atomic.Uint64
	pendMu                              sync.Mutex
	pend                                pendingTerms // the sender's term index for raft's install
	staleAppends, staleVotes, campaigns atomic.Uint64
	// sealed is the index of the last snapshot the store sealed, taken or
	// installed: the wal's reset bound (wal.Log.SetResetBound).
	sealed atomic.Uint64
	// askedPast is when the seam last asked a sender for a snapshot past
	// the floor (unix nanoseconds), to ask at most once per election
	// timeout.
	askedPast atomic.Int64
}

// interceptInstall applies Figure 13 step 6 (decideInstall) to an
// InstallSnapshot request. It returns false to let raft handle it.
func (n *Node) interceptInstall(rpc hraft.RPC, req *hraft.InstallSnapshotRequest) bool {
	r := n.raftNow()
	if r == nil {
		return false
	}
	v, stale := n.installView(r, req)
	act := decideInstall(v)
	if act == installPass {
		if n.div.is() || v.ReqTerm < v.CurTerm {
			return false // the snapshot gate refuses it (gates.go); raft refuses a stale term
		}
		switch verdict, pv := n.checkPastFloor(req, v); verdict {
		case pastVerified, pastUnverified:
			n.countPastFloor(verdict, req, pv)
			return false
		case pastRetry:
			act = installUnasked
		case pastDiverged:
			act = installDiverged
			v.AtFloor, v.SenderAtFloor, v.HeldTerm = true, pv.Sender, pv.Own
		}
	}
	if t := r.CurrentTerm(); t != v.CurTerm && act != installDiverged {
		act, v.CurTerm = installDefer, t
	}
	// The stream is drained off the seam's goroutine: other RPCs keep
	// flowing to raft while the sender writes it.
	go n.finishInstall(rpc, req, act, v, stale)
	return true
}

// installView reads what decideInstall needs: the term first, then the
// floor, the log and raft's snapshot and last entry.
func (n *Node) installView(r *hraft.Raft, req *hraft.InstallSnapshotRequest) (v installView, stale uint64) {
	v = installView{ReqTerm: req.Term, Index: req.LastLogIndex, Term: req.LastLogTerm,
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
func (n *Node) finishInstall(rpc hraft.RPC, req *hraft.InstallSnapshotRequest, act installAction, v installView, stale uint64) {
	resp := &hraft.InstallSnapshotResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: v.CurTerm}
	if err := drainInstall(rpc.Reader, req.Size); err != nil {
		rpc.Respond(resp, err)
		return
	}
	sender := string(req.RPCHeader.ID)
	lg := n.cfg.Logger.Named("seam")
	switch act {
	case installAnswer:
		n.inst.answered.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_answered"}, 1)
		lg.Info("install snapshot answered without restoring: the member holds its last entry (Figure 13 step 6)",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor)
		resp.Success = true
		rpc.Respond(resp, nil)
	case installDefer:
		n.inst.deferred.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_deferred"}, 1)
		lg.Info("install snapshot refused until raft adopts the sender's term",
			"from", sender, "request_term", v.ReqTerm, "term", v.CurTerm, "index", v.Index, "floor", v.Floor)
		rpc.Respond(resp, nil)
	case installBehind:
		n.inst.behind.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_behind"}, 1)
		want := max(v.Floor, stale) + 1
		lg.Warn("install snapshot at or below the commit floor refused: the member cannot continue from its index; asking the sender for a newer snapshot",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor, "stale_last_index", stale, "want", want)
		rpc.Respond(resp, nil)
		n.askSnapshotPast(senderAddr(req), want)
	case installUnasked:
		n.inst.unasked.Add(1)
		metrics.IncrCounter([]string{"jobraft", "raft", "install_unasked"}, 1)
		lg.Warn("install snapshot past the commit floor refused: the sender's term at the floor could not be read",
			"from", sender, "index", v.Index, "term", v.Term, "floor", v.Floor)
		rpc.Respond(resp, nil)
	case installDiverged:
		n.inst.diverged.Add(1)
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
func (n *Node) installDiverged(v installView, sender string, err error) {
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
	last := n.inst.askedPast.Load()
	if addr == "" || now-last < int64(n.cfg.ElectionTimeout) || !n.inst.askedPast.CompareAndSwap(last, now) || n.isClosed() {
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
