package catchup

import (
	"fmt"
	"time"
)

// Observation is what the leader knows about one member at one instant.
type Observation struct {
	// Voter: the member votes. Candidate: a non-voter an operator asked to
	// add (the only kind Decide promotes). Neither: a non-voter observed
	// only.
	Voter     bool
	Candidate bool
	// LeaderLast and LeaderCommit are the leader's last and commit index.
	LeaderLast   uint64
	LeaderCommit uint64
	// Reached: the member's progress report below arrived for this
	// observation. When false the member fields are ignored.
	Reached bool
	// The member's own report: raft's last index and term, commit and
	// applied index, the floor its guard persisted, the appends its guard
	// refused since it started (cumulative), and its divergence (nil when
	// none).
	LastIndex      uint64
	LastTerm       uint64
	Commit         uint64
	Applied        uint64
	PersistedFloor uint64
	GuardRefusals  uint64
	Diverged       *Divergence
	// What the leader's transport saw: a snapshot stream to the member in
	// progress and the bytes of it not yet sent (0 once all were sent: the
	// member seals and restores it before it answers), snapshot bytes sent
	// (cumulative) and failed installs (cumulative).
	Installing       bool
	InstallRemaining uint64
	InstallBytes     uint64
	InstallFailures  uint64
}

// Divergence is a member's log contradicting the leader's at or below the
// member's commit floor.
type Divergence struct {
	Index      uint64 // where the leader asked to cut, at or below the floor
	LocalTerm  uint64 // the member's term there
	LeaderTerm uint64 // the asking leader's term
}

// Action is what the caller does.
type Action int

// Actions.
const (
	// Wait: the member is catching up (a candidate in a round, or a member
	// behind the leader); nothing to do yet.
	Wait Action = iota
	// Promote: add the candidate as a voter now.
	Promote
	// Stalled: the member does not converge, for Decision.Reason.
	Stalled
	// Diverged: the member's log contradicts the leader's at or below its
	// commit floor (Decision.Divergence).
	Diverged
	// CaughtUp: the member (not a candidate) holds the leader's log.
	CaughtUp
)

// String names the action as the status and the scripts show it.
func (a Action) String() string {
	switch a {
	case Promote:
		return "promote"
	case Stalled:
		return "stalled"
	case Diverged:
		return "diverged"
	case CaughtUp:
		return "caught-up"
	}
	return "wait"
}

// Reason names why a member does not converge.
type Reason string

// Reasons.
const (
	ReasonNone           Reason = ""
	ReasonNoProgress     Reason = "no_progress"     // behind, its log and stream not moving
	ReasonUnreachable    Reason = "unreachable"     // no progress report
	ReasonInstallFailing Reason = "install_failing" // snapshot installs fail
	ReasonGuardRefusals  Reason = "guard_refusals"  // its guard refuses the leader's appends
	ReasonTooSlow        Reason = "too_slow"        // no round within an election timeout
	ReasonDiverged       Reason = "diverged"        // a committed entry differs
)

// Decision is Decide's answer for one member.
type Decision struct {
	Action Action
	Reason Reason
	// Detail says what the reason measured (indexes, counts, durations).
	Detail string
	// Round is the candidate's current (or last) round, 1-based; Target its
	// target index; RoundTook the duration of the last round that ended.
	Round     int
	Target    uint64
	RoundTook time.Duration
	// Lag is the leader's last index minus the member's (0 when unknown or
	// ahead).
	Lag        uint64
	Divergence *Divergence
}

// String is the decision as the scripts show it.
func (d Decision) String() string {
	s := d.Action.String()
	switch d.Action {
	case Wait:
		if d.Round > 0 {
			s += fmt.Sprintf(" round=%d target=%d", d.Round, d.Target)
		}
		s += fmt.Sprintf(" lag=%d", d.Lag)
	case Promote:
		s += fmt.Sprintf(" round=%d took=%s", d.Round, d.RoundTook)
	case Stalled:
		s += fmt.Sprintf(" reason=%s (%s)", d.Reason, d.Detail)
	case Diverged:
		s += fmt.Sprintf(" index=%d local-term=%d leader-term=%d", d.Divergence.Index, d.Divergence.LocalTerm, d.Divergence.LeaderTerm)
	}
	return s
}
