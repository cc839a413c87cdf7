package raft

import (
	"errors"
	"sync"
	"sync/atomic"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
)

// The member's side of the reconcile seam (package raft/seam): the rules of
// the Raft paper that hashicorp/raft v1.7.3 bends, corrected before raft
// sees an RPC. The member reads a view (raft through its lock-free
// accessors, its log), the seam package decides, the member acts on the
// verdict. Each rule is listed in docs/upstream.md with its test.

// seamHooks is the member's policy for seam.Wrap, built once. The hooks run
// on the transport's goroutines: they read raft only through its lock-free
// accessors, never through its main loop.
func (n *Node) seamHooks() seam.Hooks {
	return seam.Hooks{
		OnClamp:     n.commitClamped,     // U1
		Intercept:   n.intercept,         // U2-U5, U13
		FastPath:    n.heartbeatFastPath, // U6
		InRaft:      n.inRaftHook,        // U11: a store inside an RPC is a follower's (durable.go)
		Answered:    n.answeredHook,      // U2: adopt an installed snapshot's term index (seam_terms.go)
		CommitBound: n.commitBound,       // U11
	}
}

// seamState is the member's state at the seam: what it corrected, counted
// (Status.Seam), and what its decisions carry from one RPC to the next.
type seamState struct {
	clamps        atomic.Uint64 // appends whose commit index the seam clamped (U1)
	rerouted      atomic.Uint64 // heartbeats sent through raft's main loop (U6)
	strayTimeouts atomic.Uint64 // TimeoutNow requests refused at the seam (U5)
	unstuck       atomic.Uint64 // (pre-)votes let past a silent leader's stickiness (U13)
	// stickyFor is how long after the last contact raft's leader
	// stickiness holds (U13: the heartbeat timeout).
	stickyFor      atomic.Int64
	appendsRefused atomic.Uint64 // appends refused whole at the seam (U4; nil entries)
	inRaft         atomic.Int64  // RPCs the seam handed raft's main loop, not yet answered (durable.go, U11)

	// Installs (U2) and a stale last index (U3, stale.go).
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

// raftNow is the raft instance once NewRaft has returned (nil before: the
// seam runs from the transport's first RPC on).
func (n *Node) raftNow() *hraft.Raft { return n.raft.Load() }

// intercept answers the RPCs the seam must not let raft handle as it would.
// While raft's cached last index is stale, appends at it and unsafe votes
// are refused first (stale.go, U3).
func (n *Node) intercept(rpc hraft.RPC) bool {
	if n.refuseStale(rpc) {
		return true
	}
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
	n.seam.clamps.Add(1)
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
	v := seam.HeartbeatView{Joined: n.join.checked.Load(), Term: hb.Term} // a joining member checks its leader first (clusterid.go)
	if r := n.raftNow(); r != nil && v.Joined {
		v.Started, v.CurTerm, v.Follower = true, r.CurrentTerm(), r.State() == hraft.Follower
	}
	switch seam.Heartbeat(v) {
	case seam.RouteFast:
		return true
	case seam.RouteMainLoop:
		n.seam.rerouted.Add(1)
	}
	return false
}

// interceptTimeoutNow refuses a TimeoutNow that does not come from this
// member's current leader, or that reaches a member that is not a voting
// follower (U5). hashicorp/raft obeys any TimeoutNow at once — a leader
// too — and the election it starts skips pre-vote and every voter's leader
// stickiness (thesis §3.10: only the current leader hands over, to a voter
// it has caught up). A stray one (duplicated, late, crafted, or sent to a
// non-voter) deposes a healthy leader.
func (n *Node) interceptTimeoutNow(rpc hraft.RPC, req *hraft.TimeoutNowRequest) bool {
	v := seam.TimeoutNowView{From: string(req.ID), FromAddr: string(req.Addr)}
	if r := n.raftNow(); r != nil {
		addr, id := r.LeaderWithID()
		st := r.State()
		v.Started, v.Role, v.Follower = true, st.String(), st == hraft.Follower
		v.Leader, v.LeaderAddr = string(id), string(addr)
		v.Voter = v.Follower && n.isVoter(r)
	}
	why := seam.TimeoutNow(v)
	if why == "" {
		return false
	}
	n.seam.strayTimeouts.Add(1)
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
