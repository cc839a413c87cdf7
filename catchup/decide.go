package catchup

import (
	"fmt"
	"time"
)

// Tracker is the policy's state for one member, kept by the leader. The
// zero value is not usable: use NewTracker. A Tracker is not safe for
// concurrent use.
type Tracker struct {
	p Policy

	started bool
	// Rounds of a candidate.
	round       int
	roundStart  time.Time
	roundTarget uint64
	lastTook    time.Duration
	// slowRounds counts the rounds that count toward MaxRounds: every
	// round that took longer than an election timeout, except one that
	// ended in at most 3/4 of the time the round before it took (the
	// candidate converges: its lag shrinks round over round, as after a
	// long install whose backlog it replays).
	slowRounds int
	// The round's convergence window: the member's lag behind the leader
	// when the window opened (its first observation in the round that is
	// reached and not installing), and when.
	windowLag uint64
	windowAt  time.Time
	windowSet bool
	// Progress: when the member's log or snapshot stream last moved (or it
	// was caught up), and the values seen then.
	progressAt   time.Time
	seenLast     uint64
	seenBytes    uint64
	reachedAt    time.Time
	unreached    bool
	seenFailures uint64
	failStreak   uint64
	seenRefusals uint64
	refuseStreak int
	// final is a candidate's final decision (Stalled or Diverged).
	final *Decision
}

// NewTracker returns a tracker with p's defaults applied.
func NewTracker(p Policy) *Tracker { return &Tracker{p: p.WithDefaults()} }

// Policy returns the tracker's policy, defaults applied.
func (t *Tracker) Policy() Policy { return t.p }

// Decide takes one observation of the member at now and returns what to
// do. It is a function of the tracker's state and its arguments only.
func (t *Tracker) Decide(now time.Time, o Observation) Decision {
	if !t.started {
		t.started = true
		t.progressAt, t.reachedAt = now, now
		t.seenLast, t.seenBytes = o.LastIndex, o.InstallBytes
		t.seenFailures, t.seenRefusals = o.InstallFailures, o.GuardRefusals
	}
	if !o.Candidate {
		t.final = nil
		t.round = 0
	}
	if t.final != nil {
		return *t.final
	}
	d := t.observe(now, o)
	if o.Candidate && (d.Action == Stalled || d.Action == Diverged) {
		final := d
		t.final = &final
	}
	return d
}

// observe updates the detectors and decides.
func (t *Tracker) observe(now time.Time, o Observation) Decision {
	et := t.p.ElectionTimeout
	d := Decision{}
	if o.Reached && o.LeaderLast > o.LastIndex {
		d.Lag = o.LeaderLast - o.LastIndex
	}
	if o.Reached {
		if t.unreached {
			// Back after a gap: its progress window starts now.
			t.progressAt, t.unreached = now, false
		}
		t.reachedAt = now
		if o.Diverged != nil {
			div := *o.Diverged
			return Decision{Action: Diverged, Reason: ReasonDiverged, Divergence: &div, Lag: d.Lag,
				Detail: fmt.Sprintf("term %d at index %d, the leader's term %d", div.LocalTerm, div.Index, div.LeaderTerm)}
		}
	}
	if !o.Reached {
		t.unreached = true
	}
	moved := o.Reached && (o.LastIndex > t.seenLast || d.Lag == 0)
	// A snapshot in flight is progress while its bytes move, and once all
	// were sent: the member seals and restores it before it answers (tens
	// of seconds at millions of jobs), and its log moves only then. A
	// stream whose bytes stopped before its end is not.
	streamed := o.InstallBytes > t.seenBytes || (o.Installing && o.InstallRemaining == 0)
	if moved || streamed {
		t.progressAt = now
	}
	if moved {
		// Only the log moving clears the failure streaks: bytes of an
		// install that then fails are no progress for them.
		t.failStreak, t.refuseStreak = 0, 0
	}
	if o.InstallFailures > t.seenFailures && !moved {
		t.failStreak += o.InstallFailures - t.seenFailures
	}
	if o.Reached {
		if o.GuardRefusals > t.seenRefusals && !moved {
			t.refuseStreak++
		}
		t.seenRefusals = o.GuardRefusals
		t.seenLast = max(t.seenLast, o.LastIndex)
	}
	t.seenBytes, t.seenFailures = max(t.seenBytes, o.InstallBytes), max(t.seenFailures, o.InstallFailures)

	switch {
	case now.Sub(t.reachedAt) >= time.Duration(t.p.UnreachableRounds)*et:
		return t.stalled(d, ReasonUnreachable, "no progress report for %s", now.Sub(t.reachedAt))
	case t.failStreak >= uint64(t.p.InstallFailures):
		return t.stalled(d, ReasonInstallFailing, "%d snapshot installs failed without progress", t.failStreak)
	case t.refuseStreak >= t.p.GuardRefusals:
		return t.stalled(d, ReasonGuardRefusals, "its guard refused appends on %d observations without progress", t.refuseStreak)
	case d.Lag > 0 && now.Sub(t.progressAt) >= time.Duration(t.p.NoProgressRounds)*et:
		return t.stalled(d, ReasonNoProgress, "behind by %d, no progress for %s", d.Lag, now.Sub(t.progressAt))
	}
	if !o.Candidate {
		if o.Reached && d.Lag <= t.p.NearLag {
			d.Action = CaughtUp
		}
		return d
	}
	return t.rounds(now, o, d)
}

// rounds runs a candidate's rounds (thesis §4.2.1). A round ends when the
// member reaches the leader's last index as of the round's start; it also
// fails, without ending, when for two election timeouts the member's lag
// behind the leader did not shrink (it does not converge: the target would
// keep moving away, e.g. on a lossy link under load): such a round counts
// as a slow one, and the next round starts.
func (t *Tracker) rounds(now time.Time, o Observation, d Decision) Decision {
	if t.round == 0 {
		t.startRound(1, now, o.LeaderLast)
	}
	if o.Reached && !o.Installing && o.LastIndex >= t.roundTarget {
		took := now.Sub(t.roundStart)
		converging := t.round > 1 && took <= t.lastTook/4*3
		t.lastTook = took
		if took <= t.p.ElectionTimeout {
			d.Action, d.Round, d.Target, d.RoundTook = Promote, t.round, t.roundTarget, took
			return d
		}
		if !converging {
			t.slowRounds++
		}
		if t.slowRounds >= t.p.MaxRounds {
			d.Round, d.Target, d.RoundTook = t.round, t.roundTarget, took
			return t.stalled(d, ReasonTooSlow, "%d rounds, none within the election timeout %s (the last took %s)", t.round, t.p.ElectionTimeout, took)
		}
		t.startRound(t.round+1, now, o.LeaderLast)
	} else if o.Reached && !o.Installing {
		lag := d.Lag
		switch {
		case !t.windowSet:
			t.windowLag, t.windowAt, t.windowSet = lag, now, true
		case now.Sub(t.windowAt) >= 2*t.p.ElectionTimeout && lag >= t.windowLag:
			took := now.Sub(t.roundStart)
			t.lastTook = took
			if t.slowRounds++; t.slowRounds >= t.p.MaxRounds {
				d.Round, d.Target, d.RoundTook = t.round, t.roundTarget, took
				return t.stalled(d, ReasonTooSlow, "%d rounds, none within the election timeout %s (the last not converging: behind by %d, %d when its window opened %s before)",
					t.round, t.p.ElectionTimeout, lag, t.windowLag, now.Sub(t.windowAt))
			}
			t.startRound(t.round+1, now, o.LeaderLast)
			t.windowLag, t.windowAt, t.windowSet = lag, now, true
		case now.Sub(t.windowAt) >= 2*t.p.ElectionTimeout:
			// Converging: a new window from here.
			t.windowLag, t.windowAt = lag, now
		}
	}
	d.Action, d.Round, d.Target, d.RoundTook = Wait, t.round, t.roundTarget, t.lastTook
	return d
}

// startRound starts round r at now with the leader's last index as its
// target; its convergence window opens at its first usable observation.
func (t *Tracker) startRound(r int, now time.Time, target uint64) {
	if r == 1 {
		t.slowRounds = 0
	}
	t.round, t.roundStart, t.roundTarget = r, now, target
	t.windowSet = false
}

func (t *Tracker) stalled(d Decision, r Reason, format string, args ...any) Decision {
	d.Action, d.Reason, d.Detail = Stalled, r, fmt.Sprintf(format, args...)
	if d.Round == 0 {
		d.Round, d.Target, d.RoundTook = t.round, t.roundTarget, t.lastTook
	}
	return d
}
