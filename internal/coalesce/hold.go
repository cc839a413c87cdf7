package coalesce

// The hold decision, a pure function of the gate's state and one step.
//
// When an entry of two or more requests is answered, its callers are
// likely to come straight back (a worker submits its next job, claims it,
// acks it; a closed loop of clients), and each would otherwise take the
// next free slot alone or in a small group: a stream of concurrent callers
// splits into several groups that commit in turn, and every group pays a
// whole replication round (an fsync on each member, two network hops) for
// its share of the callers. So the coalescers hold their next entries back
// until as many requests are queued, in all of them together, as were
// waiting plus those just answered, or for at most the hold's time,
// whichever comes first (PostgreSQL's commit_delay with commit_siblings is
// the same idea). They share it because a caller answered by one often
// comes back to the other (a submit's caller claims next): released
// together, their entries reach raft together and share one replication
// round.
//
// A lone caller is never held: an entry of one request starts no hold. Nor
// are callers who do not come straight back (a worker that long-polls for
// work between two acks): after holdMisses holds in a row ended by the
// timer, the gate holds again only for one entry in holdProbe, until a
// hold fills.

// holdMisses holds in a row that the timer ended stop the gate from
// holding but for one entry in holdProbe.
const (
	holdMisses = 3
	holdProbe  = 16
)

// holdState is what the hold decision knows.
type holdState struct {
	never   bool // the hold is off (a hold time of 0)
	holding bool // dispatch waits for want requests or the timer
	want    int  // queued requests (all members) that end the hold
	misses  int  // holds in a row the timer ended
	skipped int  // entries that started no hold since the last, misses reached
}

// stepKind is what happened.
type stepKind uint8

const (
	// answered: an entry of n requests was answered.
	answered stepKind = iota
	// arrived: a request was queued.
	arrived
	// timedOut: the current hold's timer fired.
	timedOut
)

// step is one event the gate decides on.
type step struct {
	kind   stepKind
	n      int // answered: the requests of the entry
	queued int // the requests queued in every member, after the event
}

// verdict is what the shell does after a step.
type verdict uint8

const (
	// none: nothing beyond the new state.
	none verdict = iota
	// begin: a hold began: arm its timer.
	begin
	// release: the hold filled (its callers came back): stop its timer
	// and dispatch every member.
	release
	// expire: the timer ended the hold: dispatch every member.
	expire
)

// decide is the gate's next state and what to do after step e. An entry
// of two or more answered starts a hold (unless the hold is off, or
// misses stopped it and this entry is not a probe) that waits for the
// requests queued now plus those answered, and an entry answered during a
// hold adds its callers to it; a hold ends when that many are queued
// (release: the misses are forgotten) or when its timer fires (expire: a
// miss).
func decide(s holdState, e step) (holdState, verdict) {
	switch e.kind {
	case answered:
		v := none
		if !s.holding {
			if e.n < 2 || s.never {
				return s, none
			}
			if s.misses >= holdMisses {
				if s.skipped++; s.skipped < holdProbe {
					return s, none
				}
				s.skipped = 0
			}
			s.holding, s.want = true, e.queued
			v = begin
		}
		s.want += e.n
		// A hold that begins here waits for e.n more than are queued: it
		// cannot fill in the same step.
		if s2, v2 := fill(s, e.queued); v2 == release {
			return s2, release
		}
		return s, v
	case arrived:
		return fill(s, e.queued)
	case timedOut:
		if !s.holding {
			return s, none
		}
		s.holding = false
		s.misses++
		return s, expire
	}
	return s, none
}

// fill ends the hold, as the callers it waited for came back, once queued
// requests are enough.
func fill(s holdState, queued int) (holdState, verdict) {
	if !s.holding || queued < s.want {
		return s, none
	}
	s.holding = false
	s.misses, s.skipped = 0, 0
	return s, release
}
