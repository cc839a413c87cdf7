package catchup

import (
	"fmt"
	"time"
)

// A follower stuck behind a stale last index (the hashicorp/raft #697
// shape): raft caches the index and term of its last entry, and a snapshot
// install over a monotonic log store resets the log but keeps that cache.
// When the log had reached past the snapshot's index, raft keeps claiming
// an entry the member holds in neither its log nor the snapshot, and every
// append from the leader fails its check, for ever. raft.Node detects it
// (StaleLastIndex, StaleWatch) and asks the leader to move its log past the
// stale index and snapshot there (jr.snapshot.past); the leader bounds that
// request (CheckSnapshotPast).

// StaleLastIndex returns raft's cached last index when the member holds
// that entry in neither its log nor its latest snapshot, else 0. last and
// lastTerm are raft's cached last entry, logLast the log store's last
// index (read after the cache: an append stores its entries before it
// moves the cache, so a normal append is never seen as stale), snap and
// snapTerm raft's latest snapshot.
func StaleLastIndex(last, lastTerm, logLast, snap, snapTerm uint64) uint64 {
	if last <= logLast || last < snap || (last == snap && lastTerm == snapTerm) {
		return 0
	}
	return last
}

// StaleWatch debounces the follower's side: it asks only for a stale index
// seen on two consecutive ticks (a conflict truncation is stale for the
// instant before its entries are stored), and asks again for the same
// index only after retry.
type StaleWatch struct {
	seen, asked uint64
	askedAt     time.Time
}

// Step takes the tick's stale index (0: none) and returns the index to ask
// the leader for (strictly past the stale one: raft prefers its cached
// last entry over a snapshot at the same index), or 0.
func (w *StaleWatch) Step(now time.Time, stale uint64, retry time.Duration) uint64 {
	if stale == 0 || stale != w.seen {
		w.seen = stale
		return 0
	}
	if stale == w.asked && now.Sub(w.askedAt) < retry {
		return 0 // the leader is on it: its snapshot has to reach us
	}
	return stale + 1
}

// Asked records that the leader accepted a request for the stale index.
func (w *StaleWatch) Asked(now time.Time, stale uint64) { w.asked, w.askedAt = stale, now }

// PastRequest is a member's request that the leader move its log past
// Want and take a snapshot there, with what the leader knows.
type PastRequest struct {
	Want       uint64
	LeaderLast uint64
	// Member: the asking member is in the leader's configuration.
	Member bool
	// Proven is the highest index the asking member can show it has been
	// told of: its raft last index (the stale cache), its commit floor and
	// the floor its guard persisted, as its own progress report gives them.
	Proven uint64
	// Now and LastGranted (zero: never) rate-limit a member's requests.
	Now, LastGranted time.Time
	MinInterval      time.Duration
	// Max bounds how far past its log the leader moves (barriers).
	Max uint64
}

// CheckSnapshotPast returns how many barriers the leader appends for r, or
// why it refuses: the asker is not a member, asks for more than it can
// prove (Want ≤ Proven + 1), more than Max past the leader's log, or again
// within MinInterval.
func CheckSnapshotPast(r PastRequest) (barriers uint64, err error) {
	switch {
	case !r.Member:
		return 0, ErrPastNotMember
	case r.Want == 0 || r.Want > r.Proven+1:
		return 0, fmt.Errorf("%w: index %d asked, the member shows %d", ErrPastUnproven, r.Want, r.Proven)
	case r.Want > r.LeaderLast && r.Want-r.LeaderLast > r.Max:
		return 0, fmt.Errorf("%w: index %d is %d past the leader's last index %d (at most %d)", ErrPastTooFar, r.Want, r.Want-r.LeaderLast, r.LeaderLast, r.Max)
	case !r.LastGranted.IsZero() && r.Now.Sub(r.LastGranted) < r.MinInterval:
		return 0, fmt.Errorf("%w: the last one was granted %s ago (at most one per %s)", ErrPastRateLimited, r.Now.Sub(r.LastGranted), r.MinInterval)
	}
	if r.Want > r.LeaderLast {
		return r.Want - r.LeaderLast, nil
	}
	return 0, nil
}
