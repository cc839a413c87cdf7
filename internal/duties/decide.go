package duties

import (
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Policy is the duties' configuration (from jobraft.Config).
type Policy struct {
	// RetainFor and RetainPerQueue are the retention policy: terminal
	// jobs finished more than RetainFor ago (negative: kept forever) and,
	// per queue, the oldest beyond RetainPerQueue (0: no count limit).
	// Both unset: no sweeps.
	RetainFor      time.Duration
	RetainPerQueue uint32
	// SweepInterval is the least time between two sweeps.
	SweepInterval time.Duration
}

// State is what the duties remember between ticks.
type State struct {
	Term      uint64    // the term this member leads in; 0: not leading
	Since     time.Time // when it was first seen leading in Term
	LastSweep time.Time // the last sweep proposed in Term (or Since)
}

// Jobs is what a tick reads of the applied state (*fsm.Jobs).
type Jobs interface {
	// LeaseDue reports whether a running lease's deadline has passed at now.
	LeaseDue(now time.Time) bool
	// Sweepable reports whether a sweep with this policy would remove a job.
	Sweepable(maxAge time.Duration, maxPerQueue uint32, now time.Time) bool
	// ScheduleDue reports when the next schedule tick is due, as a wait
	// from now (0: due), ok false when none has a tick left.
	ScheduleDue(now time.Time) (wait time.Duration, ok bool)
}

var _ Jobs = (*fsm.Jobs)(nil)

// Tick is what one check sees.
type Tick struct {
	Leading bool   // the member is leader
	Term    uint64 // its current term
	Now     time.Time
	Jobs    Jobs
}

// Plan is what one tick proposes, in order (nil: nothing).
type Plan struct {
	Expire *fsm.ExpireCmd
	Sweep  *fsm.SweepCmd
	Fire   *fsm.FireCmd
}

// Decide is one tick: the state to remember and what to propose. Not
// leading forgets the term. A new term starts from Now (Since and the sweep
// clock). An expire is proposed when a lease is due; a sweep when the
// policy retains anything, SweepInterval has passed since the last and the
// state shows a job it would remove; a fire when a schedule's tick is due
// (the state machine fires what is due at the entry's log time, so a
// repeated or concurrent fire fires nothing twice).
func Decide(s State, t Tick, p Policy) (State, Plan) {
	if !t.Leading {
		return State{}, Plan{}
	}
	if t.Term != s.Term {
		s = State{Term: t.Term, Since: t.Now, LastSweep: t.Now}
	}
	var plan Plan
	if t.Jobs.LeaseDue(t.Now) {
		plan.Expire = &fsm.ExpireCmd{LeaderSince: s.Since, Term: s.Term}
	}
	sweep := fsm.SweepCmd{MaxAge: max(p.RetainFor, 0), MaxPerQueue: p.RetainPerQueue}
	if (p.RetainFor > 0 || p.RetainPerQueue > 0) && t.Now.Sub(s.LastSweep) >= p.SweepInterval &&
		t.Jobs.Sweepable(sweep.MaxAge, sweep.MaxPerQueue, t.Now) {
		s.LastSweep = t.Now
		plan.Sweep = &sweep
	}
	if wait, ok := t.Jobs.ScheduleDue(t.Now); ok && wait == 0 {
		plan.Fire = &fsm.FireCmd{}
	}
	return s, plan
}

// Wake is how long a leader's duties may sleep before the next schedule
// tick (wait, ok as Jobs.ScheduleDue says): at most interval, at least a
// millisecond.
func Wake(wait time.Duration, ok bool, interval time.Duration) time.Duration {
	if !ok || wait > interval {
		return interval
	}
	return max(wait, time.Millisecond)
}
