package raft

import (
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
)

// Leader stickiness (docs/upstream.md U13). The Raft thesis (§4.2.3, and
// §9.6 for pre-vote) has a server ignore a vote request only within the
// minimum election timeout of hearing from a current leader: the rule
// keeps a server that lost touch (a removed one, a partitioned one) from
// deposing a live leader. hashicorp/raft refuses a vote or pre-vote for
// as long as it knows a leader at all, until its own heartbeat timer
// fires and finds the leader silent. That timer is randomized in [H, 2H)
// and rearmed whenever it fires within H of the last contact, so a
// follower keeps a leader that went silent for up to 3H. When a leader
// freezes, the follower whose timer fired first is refused by the other
// for that long; if the other's log is behind, the other's own campaign is
// refused in turn and the election waits for the first one's next round:
// up to 3H + 2E without a leader, where the thesis's rule allows H plus an
// election.
//
// So, at the seam, on a follower that knows a leader other than the
// candidate and has not heard from it for its heartbeat timeout H (the
// thesis's minimum election timeout):
//
//   - a vote request goes to raft with LeadershipTransfer set, which lifts
//     raft's stickiness check and nothing else: raft's configuration, term,
//     vote and log checks all still decide, and raft persists the vote;
//   - a pre-vote request is answered by the seam with raft's own pre-vote
//     rule less the stickiness (seam.PreVote). A pre-vote changes nothing
//     on the member; the vote that follows is raft's to grant.
//
// A request that finds the leader silent for H less two heartbeat
// intervals (H/5: hashicorp/raft's leader sends one every H/10 to 2H/10,
// so a candidate whose own silence reached H may be asking a member whose
// last heartbeat came up to that much later) waits on the seam until the
// silence would reach H, and at least H/5, then looks again (seam.LiftWait).
// The wait is what keeps a member's own stall from passing for its
// leader's silence: heartbeats queued while its process stood still run on
// raft's fast path during the wait (the seam's goroutine does not carry
// them) and end the silence. Otherwise, within H of the last contact, and
// on a member that is not a follower, raft decides alone as before.

// view is the stickiness rule's input for a request from candidate (an
// encoded address), with threshold t.
func (n *Node) view(r *hraft.Raft, candidate []byte, t time.Duration) seam.StickyView {
	addr, _ := r.LeaderWithID()
	return seam.StickyView{
		Follower: r.State() == hraft.Follower, Leader: string(addr), Candidate: string(candidate),
		Silent: time.Since(r.LastContact()), Timeout: t,
	}
}

// silentLeader reports whether a (pre-)vote request from candidate meets a
// follower whose leader has been silent for its heartbeat timeout H, and
// for how long it has been. A request that finds it silent for H less H/5
// waits on the seam (seam.LiftWait) and looks again.
func (n *Node) silentLeader(r *hraft.Raft, candidate []byte) (time.Duration, bool) {
	h := time.Duration(n.seam.stickyFor.Load())
	v := n.view(r, candidate, h-h/5)
	if !seam.LeaderSilent(v) {
		return v.Silent, false
	}
	t := time.NewTimer(seam.LiftWait(h, v.Silent))
	defer t.Stop()
	select {
	case <-t.C:
	case <-n.life.Done():
		return v.Silent, false
	}
	v = n.view(r, candidate, h)
	return v.Silent, seam.LeaderSilent(v)
}

// unstickVote lifts raft's leader stickiness from a vote request when the
// member's leader has been silent for its heartbeat timeout (silentLeader).
// raft handles the request either way, and may still refuse it.
func (n *Node) unstickVote(r *hraft.Raft, req *hraft.RequestVoteRequest) {
	if req.LeadershipTransfer {
		return // a transfer's election: raft lifts the stickiness itself
	}
	silent, ok := n.silentLeader(r, req.Addr) // protocol 3: the candidate's address is in the header
	if !ok {
		return
	}
	req.LeadershipTransfer = true
	n.lifted("vote request handed to raft", req.ID, req.Term, silent, "decided_by", "raft")
}

// lifted counts and logs a request let past the silent leader's
// stickiness.
func (n *Node) lifted(what string, candidate []byte, term uint64, silent time.Duration, kv ...any) {
	n.seam.unstuck.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "stickiness_lifted"}, 1)
	n.cfg.Logger.Named("seam").Info(what+" without leader stickiness: the leader has been silent for the heartbeat timeout",
		append([]any{"candidate", string(candidate), "term", term, "silent", silent.Round(time.Millisecond)}, kv...)...)
}

// answerPreVote answers a pre-vote request itself, granted or refused by
// raft's rule less the stickiness, when the member's leader has been silent
// for its heartbeat timeout (silentLeader: raft would refuse it for the
// leader alone). It reports false when raft should answer.
func (n *Node) answerPreVote(r *hraft.Raft, rpc hraft.RPC, req *hraft.RequestPreVoteRequest) bool {
	silent, ok := n.silentLeader(r, req.Addr)
	if !ok {
		return false
	}
	v := seam.PreVoteView{Term: r.CurrentTerm(), ReqTerm: req.Term, CandIndex: req.LastLogIndex, CandTerm: req.LastLogTerm}
	in, voter, empty := suffrage(r, string(req.ID))
	v.InConfig, v.Voter = in || empty, voter || empty // raft grants while bootstrapping
	st := statsOf(r)
	v.LastIndex, v.LastTerm = st.LastLogIndex, st.LastLogTerm
	if st.LastSnapshotIndex > st.LastLogIndex {
		v.LastIndex, v.LastTerm = st.LastSnapshotIndex, st.LastSnapshotTerm
	}
	granted := seam.PreVote(v)
	resp := &hraft.RequestPreVoteResponse{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(n.cfg.ID), Addr: []byte(n.nt.LocalAddr())},
		Term:      max(v.Term, req.Term),
		Granted:   granted,
	}
	n.lifted("pre-vote answered", req.ID, req.Term, silent, "granted", granted)
	rpc.Respond(resp, nil)
	return true
}
