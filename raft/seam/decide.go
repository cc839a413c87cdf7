package seam

import "time"

// This file is the seam's pure core: every decision the reconcile seam
// makes, as a function of a plain view of the member and the request, with
// no IO. The member (package raft) reads the view — raft through its
// lock-free accessors, its log — calls the decision and acts on the verdict;
// the wrapper (wrap.go) applies the clamp itself. decide_test.go checks each
// decision with a table and all of them with a rapid property test.
//
//	U1  Clamp        an append's commit index, at most its last verified entry
//	U2  Install      Figure 13 step 6: answer, defer, refuse or pass an install
//	    PastFloor    an install past the floor, checked at the floor
//	    AfterCheck   the install's action after the floor check
//	    Recheck      the term moved during the lookups: defer
//	U3  StaleAppend  an append at raft's stale last index
//	    StaleVote    a (pre-)vote to a candidate behind what the member holds
//	U4  Append       a truncation whose store would be refused, a nil entry
//	U5  TimeoutNow   only from the current leader, to a voting follower
//	U6  Heartbeat    which heartbeats may take raft's fast path
//	U10 Campaign     no campaign while diverged, failed or stale
//	U11 Bound        the commit index a member may send and persist
//	U13 LeaderSilent, LiftWait, PreVote: a silent leader's stickiness lifted
//
// docs/upstream.md gives each rule's reason and the tests that prove it.

// Clamp is the Raft paper's Figure 2 rule for an append (U1): the follower's
// commit index moves to at most the last entry this append verified,
// prev + entries (a log is contiguous). It returns the commit index to use
// and whether it is lower than the leader's.
func Clamp(prev uint64, entries int, leaderCommit uint64) (commit uint64, clamped bool) {
	if verified := prev + uint64(entries); leaderCommit > verified {
		return verified, true
	}
	return leaderCommit, false
}

// Bound is the commit index a member may send followers as committed and
// persist as its commit floor (U11): raft's commit index as far as its own
// log is durable.
func Bound(commit, durable uint64) uint64 { return min(commit, durable) }

// InstallAction is what the seam does with an InstallSnapshot request.
type InstallAction int

const (
	InstallPass     InstallAction = iota // hand it to raft
	InstallAnswer                        // Success without restoring (Figure 13 step 6)
	InstallDefer                         // refuse: raft has not adopted the sender's higher term yet
	InstallBehind                        // refuse and ask the sender for a snapshot past the floor
	InstallDiverged                      // refuse loudly: another term at a committed index
	InstallUnasked                       // refuse: past the floor, and the sender's term index could not be read
)

func (a InstallAction) String() string {
	switch a {
	case InstallAnswer:
		return "answered"
	case InstallDefer:
		return "deferred"
	case InstallBehind:
		return "behind"
	case InstallDiverged:
		return "diverged"
	case InstallUnasked:
		return "unasked"
	}
	return "pass"
}

// InstallView is what the member knows when it decides on an install, read
// without raft's main loop.
type InstallView struct {
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
	// index is not stale.
	IsLast bool
	// AtFloor: the floor check found the sender holding term SenderAtFloor
	// at Floor, where this member holds HeldTerm.
	AtFloor       bool
	SenderAtFloor uint64
}

// Install is Figure 13 step 6 at the seam (U2). A snapshot past the floor
// that the log does not hold with its term is raft's to install; one the
// member holds, or that ends at or below its floor, is answered without
// restoring in the sender's term when raft's next append from its index
// will pass (the log holds it, or it is raft's last entry), refused in a
// higher term (raft adopts it from the leader's next heartbeat), refused as
// behind when the entry was compacted into a newer local snapshot, and
// refused loudly when the member holds another term at that committed
// index. A request of an older term is raft's to refuse.
func Install(v InstallView) InstallAction {
	if v.Index > v.Floor {
		if !v.InLog {
			return InstallPass // an ordinary install
		}
	} else if v.HeldTerm != 0 && v.HeldTerm != v.Term {
		return InstallDiverged
	}
	switch {
	case v.ReqTerm < v.CurTerm:
		return InstallPass // raft refuses an older term without installing
	case v.ReqTerm > v.CurTerm:
		return InstallDefer
	case v.InLog || v.IsLast:
		return InstallAnswer
	default:
		return InstallBehind
	}
}

// NeedsFloorCheck reports whether an install Install passed to raft is
// checked at the floor first: not on a diverged member (its snapshot gate
// refuses every install) and not in an older term (raft refuses it).
func NeedsFloorCheck(v InstallView, diverged bool) bool {
	return !diverged && v.ReqTerm >= v.CurTerm
}

// PastVerdict is what the floor check decided for an install past the
// floor.
type PastVerdict int

const (
	PastVerified   PastVerdict = iota // both hold the same term at the floor
	PastUnverified                    // a side does not know its term there
	PastDiverged                      // the terms at the floor differ
	PastRetry                         // the sender could not be asked
)

// PastView is what the floor check knows.
type PastView struct {
	Floor                 uint64
	Own, Sender           uint64 // terms at the floor
	OwnKnown, SenderKnown bool
	// Asked: the sender answered jr.terms; Old: it has no such method.
	Asked, Old bool
}

// PastFloor is the floor check of an install past the floor (U2): by Log
// Matching, two logs agree up to the floor exactly when their entries there
// have the same term.
func PastFloor(v PastView) PastVerdict {
	switch {
	case v.Floor == 0:
		return PastVerified // nothing committed to contradict
	case v.Old:
		return PastUnverified
	case !v.Asked:
		return PastRetry
	case !v.OwnKnown || !v.SenderKnown:
		return PastUnverified
	case v.Own != v.Sender:
		return PastDiverged
	}
	return PastVerified
}

// AfterCheck is the install's action after the floor check: verified or
// unverified, raft installs it; diverged, refused loudly; the sender not
// asked, refused (the leader retries).
func AfterCheck(p PastVerdict) InstallAction {
	switch p {
	case PastDiverged:
		return InstallDiverged
	case PastRetry:
		return InstallUnasked
	}
	return InstallPass
}

// Recheck is the install's action once raft's term was read again after
// the lookups (now): if it moved, the request is refused as in a higher
// term, so an answer never claims an entry in a term in which raft may
// already have truncated it. A divergence stands.
func Recheck(act InstallAction, before, now uint64) InstallAction {
	if now != before && act != InstallDiverged {
		return InstallDefer
	}
	return act
}

// UpToDate is the Raft paper's election restriction (§5.4.1): whether a
// candidate's last entry (index, term) is at least as up to date as the
// voter's (lastIndex, lastTerm).
func UpToDate(index, term, lastIndex, lastTerm uint64) bool {
	return term > lastTerm || (term == lastTerm && index >= lastIndex)
}

// StaleAppend reports whether an append must be refused because its
// previous entry is raft's stale last index (U3; stale 0: not stale): the
// member does not hold that entry, whatever raft's cache says.
func StaleAppend(stale, prev uint64) bool { return stale != 0 && prev == stale }

// StaleVoteView is what the stale vote check looks at.
type StaleVoteView struct {
	Stale               uint64 // raft's stale last index (0: not stale)
	RealIndex, RealTerm uint64 // the last entry the member really holds
	CandIndex, CandTerm uint64 // the candidate's last entry
}

// StaleVote reports whether a vote or pre-vote must be refused while raft's
// last index is stale (U3): the candidate is behind what the member really
// holds. raft checks its cache as well.
func StaleVote(v StaleVoteView) bool {
	return v.Stale != 0 && !UpToDate(v.CandIndex, v.CandTerm, v.RealIndex, v.RealTerm)
}

// AppendVerdict is what the seam does with an append (U4).
type AppendVerdict int

const (
	AppendPass          AppendVerdict = iota // raft handles it
	AppendRefuseNil                          // an entry is nil: raft would crash
	AppendRefuseReplace                      // raft's truncation would be followed by a refused store: neither happens
)

// AppendView is what the append check looks at. The member fills it in
// order and may stop at the first field that decides: Conflict only for a
// request of a term not below its own, ReplaceRefused only with Conflict.
type AppendView struct {
	NilEntry         bool   // an entry of the request is nil
	ReqTerm, CurTerm uint64 // the request's term; raft's current term
	// Conflict: raft would truncate (its walk over the log finds an entry
	// in conflict after the previous entry matched).
	Conflict bool
	// ReplaceRefused: the log would refuse the truncation and then the
	// batch (wal.Log.CheckReplace).
	ReplaceRefused bool
}

// Append is the seam's check of an append carrying entries (U4): a nil
// entry is refused (raft dereferences it); an append raft would truncate
// for, whose batch the log would then refuse, is refused whole, so raft's
// truncation and store succeed or fail together. Everything else is raft's.
func Append(v AppendView) AppendVerdict {
	switch {
	case v.NilEntry:
		return AppendRefuseNil
	case v.ReqTerm < v.CurTerm:
		return AppendPass // raft refuses it without looking at the log
	case v.Conflict && v.ReplaceRefused:
		return AppendRefuseReplace
	}
	return AppendPass
}

// TimeoutNowView is what the TimeoutNow rule looks at.
type TimeoutNowView struct {
	Started  bool   // raft runs
	Role     string // raft's state ("Follower", ...)
	Follower bool
	// Leader, LeaderAddr: the member's current leader ("" none known);
	// From, FromAddr: the request's sender (FromAddr "" when not given).
	Leader, LeaderAddr, From, FromAddr string
	Voter                              bool // the member is a voter in its latest configuration
}

// TimeoutNow decides a TimeoutNow request (U5, thesis §3.10): obeyed ("")
// only when it comes from the member's current leader and the member is a
// voting follower; otherwise the reason it is refused.
func TimeoutNow(v TimeoutNowView) (refusal string) {
	switch {
	case !v.Started:
		return "not started"
	case !v.Follower:
		return "not a follower (" + v.Role + ")"
	case v.Leader == "" || v.From != v.Leader || (v.FromAddr != "" && v.FromAddr != v.LeaderAddr):
		return "not from the current leader"
	case !v.Voter:
		return "not a voter"
	}
	return ""
}

// Route is where a heartbeat goes.
type Route int

const (
	RouteFast     Route = iota // raft's fast path, on the connection's goroutine
	RouteMainLoop              // through the consumer: raft's main loop (counted)
	RouteJoin                  // through the consumer: a joining member checks its leader first
)

// HeartbeatView is what the heartbeat routing looks at.
type HeartbeatView struct {
	Joined   bool   // the member's join check is done (or not needed)
	Started  bool   // raft runs
	Term     uint64 // the heartbeat's term
	CurTerm  uint64 // raft's current term
	Follower bool
}

// Heartbeat routes a heartbeat (U6, hashicorp/raft #695): the fast path
// only when it cannot change the member's term or role — its current term,
// on a follower. raft's fast-path handler changes both outside its main
// loop.
func Heartbeat(v HeartbeatView) Route {
	switch {
	case !v.Joined:
		return RouteJoin
	case !v.Started || v.Term != v.CurTerm || !v.Follower:
		return RouteMainLoop
	}
	return RouteFast
}

// CampaignVerdict is whether the member may send vote requests.
type CampaignVerdict int

const (
	CampaignOK        CampaignVerdict = iota
	CampaignDiverged                  // a committed divergence: no campaign until re-seeded
	CampaignLogFailed                 // its log failed closed: it could win and never append (U10)
	CampaignStale                     // raft's last index is stale: its requests would claim it (U3)
)

// CampaignView is what the campaign gate looks at. Stale is read only when
// neither of the others holds.
type CampaignView struct {
	Diverged, LogFailed bool
	Stale               uint64 // raft's stale last index (0: not stale)
}

// Campaign is the campaign gate's rule (U10, U3).
func Campaign(v CampaignView) CampaignVerdict {
	switch {
	case v.Diverged:
		return CampaignDiverged
	case v.LogFailed:
		return CampaignLogFailed
	case v.Stale != 0:
		return CampaignStale
	}
	return CampaignOK
}

// StickyView is what the stickiness rule looks at (U13).
type StickyView struct {
	Follower          bool
	Leader, Candidate string        // addresses ("" : no leader known)
	Silent, Timeout   time.Duration // since the last contact; the threshold
}

// LeaderSilent reports whether raft's leader stickiness would refuse the
// candidate although the member has not heard from its leader within the
// timeout (the thesis's §4.2.3 rule lets the request through).
func LeaderSilent(v StickyView) bool {
	return v.Follower && v.Leader != "" && v.Leader != v.Candidate && v.Silent >= v.Timeout
}

// LiftWait is how long a request that found the leader silent for silent
// (at least h less h/5) waits before the seam looks again, for heartbeat
// timeout h: until the silence would reach h, and at least h/5 (two of the
// leader's heartbeat intervals).
func LiftWait(h, silent time.Duration) time.Duration { return max(h/5, h-silent) }

// PreVoteView is what PreVote looks at.
type PreVoteView struct {
	// InConfig: the candidate is in the member's latest configuration (or
	// that configuration is empty); Voter: it is a voter there.
	InConfig, Voter     bool
	Term, ReqTerm       uint64 // the member's current term; the request's
	LastIndex, LastTerm uint64 // the member's last entry (log or snapshot), as raft sees it
	CandIndex, CandTerm uint64 // the candidate's last entry
}

// PreVote is raft's pre-vote rule (raft.go requestPreVote) without its
// leader check: whether the member grants the pre-vote.
func PreVote(v PreVoteView) bool {
	return v.InConfig && v.Voter && v.ReqTerm >= v.Term && UpToDate(v.CandIndex, v.CandTerm, v.LastIndex, v.LastTerm)
}
