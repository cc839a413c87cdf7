package raft

import (
	"context"
	"encoding/binary"
	"errors"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal/segment"
)

// An install past the commit floor, checked at the floor (docs/upstream.md
// U2, "past the floor").
//
// A snapshot names only its last index and term. When it ends past a
// member's commit floor F, at an entry the member does not hold, Figure 13
// step 6 hands it to raft, which installs it: the member's log is reset and
// its state replaced. That is a lagging member's ordinary catch-up — and
// also what a member that committed entries the cluster lost (a lying disk
// elsewhere, a restored backup) would do with the other history, silently:
// by Log Matching, the two agree on everything up to F exactly when their
// entries at F have the same term, and the snapshot does not say which
// term the sender held there. The sender's log usually no longer holds F
// either (that is why it sends a snapshot), but its term index does
// (wal.Log.TermStarts: the index at which each term began, kept across
// compaction).
//
// So before it lets raft install a snapshot past a floor F > 0, the seam
// asks the sender for its term index through the snapshot's index
// (jr.terms) and compares the sender's term at F with its own
// (wal.Log.TermAt):
//
//   - equal: the install goes to raft (verified);
//   - different: the request is refused loudly and the member is diverged,
//     as for any contradiction at a committed index (installDiverged);
//   - either side does not know its term at F (a log written before the
//     term index existed, a sender without jr.terms, a reset that crashed
//     before its adoption): the install goes to raft unverified, counted
//     and logged, as before the check existed;
//   - the sender cannot be asked (unreachable, timeout): the request is
//     refused; the leader retries after its backoff.
//
// The seam's goroutine waits for the answer (a round trip on a LAN, at most
// an election timeout): raft's main loop would spend that long in the
// install itself. After raft installed the snapshot, the member adopts the
// sender's term index through the snapshot (wal.Log.AdoptTerms), so that it
// too can answer for the history it holds only as a snapshot.
const methodTermStarts = "jr.terms"

// handleTermStarts answers jr.terms: this member's term index through the
// requested index (known 0 when it does not know the terms up to there).
func (n *Node) handleTermStarts(_ context.Context, req []byte) ([]byte, error) {
	if len(req) != 8 {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "an index required"}
	}
	return n.log.TermStarts(binary.LittleEndian.Uint64(req)).Encode(), nil
}

// pendingTerms is the sender's term index for the install raft is about to
// do, adopted once raft reports it installed.
type pendingTerms struct {
	index, term uint64
	t           segment.TermList
	set         bool
}

// checkPastFloor runs the floor check for an install seam.Install passed
// to raft. It returns the verdict, with the view for a diverged one.
func (n *Node) checkPastFloor(req *hraft.InstallSnapshotRequest, v seam.InstallView) (seam.PastVerdict, seam.PastView) {
	pv := seam.PastView{Floor: v.Floor}
	ctx, cancel := context.WithTimeout(transport.ExpectPeer(n.life, string(req.ID)), n.cfg.ElectionTimeout)
	defer cancel()
	rep, err := n.caller.Call(ctx, senderAddr(req), methodTermStarts, binary.LittleEndian.AppendUint64(nil, req.LastLogIndex))
	var re *transport.RemoteError
	var sender segment.TermList
	switch {
	case errors.As(err, &re) && re.Code == transport.CodeUnknownMethod:
		pv.Old = true
	case err != nil:
		n.cfg.Logger.Named("seam").Warn("install snapshot: cannot read the sender's term index", "from", string(req.ID), "error", err)
	default:
		t, derr := segment.DecodeTermList(rep)
		if derr != nil || t.Through != req.LastLogIndex {
			n.cfg.Logger.Named("seam").Warn("install snapshot: the sender's term index is malformed", "from", string(req.ID),
				"through", t.Through, "index", req.LastLogIndex, "error", derr)
			break
		}
		pv.Asked = true
		if term, ok := t.TermAt(req.LastLogIndex); ok && term == req.LastLogTerm {
			sender = t
		} else if ok {
			n.cfg.Logger.Named("seam").Warn("install snapshot: the sender's term index holds another term at the snapshot's index; not used",
				"from", string(req.ID), "index", req.LastLogIndex, "snapshot_term", req.LastLogTerm, "index_term", term)
		}
	}
	pv.Sender, pv.SenderKnown = sender.TermAt(v.Floor)
	if v.Floor > 0 {
		pv.Own, pv.OwnKnown = n.log.TermAt(v.Floor)
	}
	verdict := seam.PastFloor(pv)
	if seam.AfterCheck(verdict) == seam.InstallPass {
		n.seam.pendMu.Lock()
		n.seam.pend = pendingTerms{index: req.LastLogIndex, term: req.LastLogTerm, t: sender, set: sender.Known != 0}
		n.seam.pendMu.Unlock()
	}
	return verdict, pv
}

// answeredHook is the seam's Answered hook: once raft installed a snapshot
// whose sender's term index the floor check read, the member adopts it.
func (n *Node) answeredHook(rpc hraft.RPC, resp hraft.RPCResponse) {
	req, ok := rpc.Command.(*hraft.InstallSnapshotRequest)
	if !ok {
		return
	}
	n.seam.pendMu.Lock()
	p := n.seam.pend
	n.seam.pend = pendingTerms{}
	n.seam.pendMu.Unlock()
	ir, _ := resp.Response.(*hraft.InstallSnapshotResponse)
	if resp.Error != nil || ir == nil || !ir.Success {
		return
	}
	lg := n.cfg.Logger.Named("seam")
	if p.set && p.index == req.LastLogIndex && p.term == req.LastLogTerm {
		err := n.log.AdoptTerms(p.index, p.term, p.t)
		if err == nil {
			metrics.IncrCounter([]string{"jobraft", "raft", "install_terms_adopted"}, 1)
			return
		}
		lg.Warn("installed snapshot: the sender's term index was not adopted", "index", p.index, "term", p.term, "error", err)
	}
	// Whatever the log knew at or below the snapshot was another point's
	// (raft does not reset an empty log): it now knows terms from its next
	// entry on.
	if err := n.log.ForgetTerms(req.LastLogIndex); err != nil {
		lg.Warn("installed snapshot: the term index below it could not be dropped", "index", req.LastLogIndex, "error", err)
	}
}

// anchorTerms runs once raft has started: a term index adopted for a
// snapshot the member does not start from (killed between a later install
// and its adoption; raft does not reset an empty log) is dropped.
func (n *Node) anchorTerms(r *hraft.Raft) {
	through := n.log.TermsThrough()
	if through == 0 {
		return
	}
	if snap := statsOf(r).LastSnapshotIndex; snap != through {
		if err := n.log.ForgetTerms(snap); err != nil {
			n.cfg.Logger.Named("seam").Warn("the term index adopted for another snapshot could not be dropped",
				"adopted_for", through, "snapshot", snap, "error", err)
		}
	}
}

// countPastFloor counts (and, unverified, logs) an install past the floor
// that goes to raft.
func (n *Node) countPastFloor(verdict seam.PastVerdict, req *hraft.InstallSnapshotRequest, pv seam.PastView) {
	if verdict == seam.PastVerified {
		n.seam.verified.Add(1)
		return
	}
	n.seam.unverified.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "install_unverified"}, 1)
	n.cfg.Logger.Named("seam").Warn("install snapshot past the commit floor not checked at the floor: a term there is not known",
		"from", string(req.ID), "index", req.LastLogIndex, "floor", pv.Floor, "own_known", pv.OwnKnown,
		"sender_known", pv.SenderKnown, "sender_without_term_index", pv.Old)
}
