package raft

import (
	"errors"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// The member's policy at the reconcile seam (transport.Seam): the rules of
// the Raft paper that hashicorp/raft v1.7.3 bends, corrected before raft
// sees an RPC. Each is listed in docs/upstream.md with its test.

// seamHooks is the node's policy for transport.Seam. The hooks run on the
// transport's goroutines: they read raft only through its lock-free
// accessors, never through its main loop.
func (n *Node) seamHooks() transport.SeamHooks {
	return transport.SeamHooks{
		OnClamp:   n.commitClamped,
		Intercept: n.intercept,
		FastPath:  n.heartbeatFastPath,
	}
}

// raftNow is the raft instance once NewRaft has returned (nil before: the
// seam runs from the transport's first RPC on).
func (n *Node) raftNow() *hraft.Raft { return n.raft.Load() }

// intercept answers the RPCs the seam must not let raft handle as it would.
func (n *Node) intercept(rpc hraft.RPC) bool {
	switch req := rpc.Command.(type) {
	case *hraft.TimeoutNowRequest:
		return n.interceptTimeoutNow(rpc, req)
	case *hraft.AppendEntriesRequest:
		if !n.joinChecked(rpc, req.RPCHeader) {
			return true // a joining member refused it (clusterid.go)
		}
		return n.checkAppend(rpc, req)
	case *hraft.InstallSnapshotRequest:
		if !n.joinChecked(rpc, req.RPCHeader) {
			return true
		}
		return n.interceptInstall(rpc, req)
	case *hraft.RequestVoteRequest:
		if r := n.raftNow(); r != nil {
			n.unstickVote(r, req)
		}
	case *hraft.RequestPreVoteRequest:
		if r := n.raftNow(); r != nil {
			return n.answerPreVote(r, rpc, req)
		}
	}
	return false
}

// commitClamped is the seam's report that an incoming append carried a
// leader commit index past the last entry it verified, and was clamped
// (U1). It is not an error: a leader may legitimately know a higher commit
// index than what it has sent this follower so far. It is counted, because
// a member that sees many is being sent appends that hashicorp/raft alone
// would have let it commit too far.
func (n *Node) commitClamped(leaderCommit, clamped uint64) {
	n.clamps.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "commit_clamped"}, 1)
	n.cfg.Logger.Named("seam").Debug("append commit index clamped to the last verified entry",
		"leader-commit", leaderCommit, "clamped-to", clamped)
}

// heartbeatFastPath lets a heartbeat run on the connection's goroutine only
// when it cannot change this member's term or role (U6, hashicorp/raft
// #695): a heartbeat of the member's current term while it is a follower.
// raft's handler changes term and role without its main loop's knowledge,
// so a higher-term heartbeat landing while the leader loop stamps a batch
// could give the old leader's own entries the new leader's term. Every
// other heartbeat goes through the main loop like any RPC.
func (n *Node) heartbeatFastPath(hb *hraft.AppendEntriesRequest) bool {
	r := n.raftNow()
	if !n.join.checked.Load() {
		return false // a joining member checks its leader first (clusterid.go)
	}
	if r == nil || hb.Term != r.CurrentTerm() || r.State() != hraft.Follower {
		n.rerouted.Add(1)
		return false
	}
	return true
}

// interceptTimeoutNow refuses a TimeoutNow that does not come from this
// member's current leader, or that reaches a member that is not a voting
// follower (U5). hashicorp/raft obeys any TimeoutNow at once — a leader
// too — and the election it starts skips pre-vote and every voter's leader
// stickiness (thesis §3.10: only the current leader hands over, to a voter
// it has caught up). A stray one (duplicated, late, crafted, or sent to a
// non-voter) deposes a healthy leader.
func (n *Node) interceptTimeoutNow(rpc hraft.RPC, req *hraft.TimeoutNowRequest) bool {
	r := n.raftNow()
	why := ""
	switch {
	case r == nil:
		why = "not started"
	case r.State() != hraft.Follower:
		why = "not a follower (" + r.State().String() + ")"
	default:
		addr, id := r.LeaderWithID()
		switch {
		case id == "" || string(req.ID) != string(id) || (len(req.Addr) > 0 && string(req.Addr) != string(addr)):
			why = "not from the current leader"
		case !n.isVoter(r):
			why = "not a voter"
		}
	}
	if why == "" {
		return false
	}
	n.strayTimeouts.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "timeout_now_refused"}, 1)
	n.cfg.Logger.Named("seam").Warn("TimeoutNow refused", "from", string(req.ID), "reason", why)
	rpc.Respond(nil, errors.Join(ErrRefusedAtSeam, errors.New("timeout-now "+why)))
	return true
}

// isVoter reports whether this member is a voter in raft's latest
// configuration (read without raft's main loop).
func (n *Node) isVoter(r *hraft.Raft) bool {
	_, voter, _ := suffrage(r, n.cfg.ID)
	return voter
}

// suffrage reports whether member id is in raft's latest configuration and
// a voter there, and whether that configuration is empty (a member not
// bootstrapped yet), read without raft's main loop.
func suffrage(r *hraft.Raft, id string) (member, voter, empty bool) {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false, false, false
	}
	servers := f.Configuration().Servers
	for _, s := range servers {
		if string(s.ID) == id {
			return true, s.Suffrage == hraft.Voter, false
		}
	}
	return false, false, len(servers) == 0
}
