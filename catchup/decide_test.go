package catchup

import (
	"errors"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A candidate is never promoted in the same observation in which a round
// that took longer than the election timeout ends, whatever the timing;
// and every Promote follows a round that took at most the election
// timeout (a table over round durations around the bound).
func TestPromoteOnlyAfterAShortRound(t *testing.T) {
	et := 300 * time.Millisecond
	for _, tc := range []struct {
		took    time.Duration
		promote bool
	}{
		{0, true}, {et - time.Millisecond, true}, {et, true}, {et + time.Millisecond, false}, {10 * et, false},
	} {
		tr := NewTracker(Policy{ElectionTimeout: et})
		tr.Decide(epoch, Observation{Candidate: true, Reached: true, LeaderLast: 100, LastIndex: 0})
		d := tr.Decide(epoch.Add(tc.took), Observation{Candidate: true, Reached: true, LeaderLast: 150, LastIndex: 100})
		if got := d.Action == Promote; got != tc.promote {
			t.Errorf("round of %s: %v, want promote=%v", tc.took, d, tc.promote)
		}
		if d.Action == Promote && d.RoundTook > et {
			t.Errorf("promoted after a round of %s", d.RoundTook)
		}
		if !tc.promote && (d.Action != Wait || d.Round != 2 || d.Target != 150) {
			t.Errorf("after a long round: %v, want round 2 targeting 150", d)
		}
	}
}

// A candidate in a snapshot stream is not promoted, even when its last
// index (raft's, while the install runs) already reads the target.
func TestNoPromotionWhileInstalling(t *testing.T) {
	tr := NewTracker(Policy{ElectionTimeout: time.Second})
	d := tr.Decide(epoch, Observation{Candidate: true, Reached: true, LeaderLast: 10, LastIndex: 10, Installing: true})
	if d.Action != Wait {
		t.Fatalf("%v while installing", d)
	}
}

// A stalled or diverged candidate stays so; the same member marked a voter
// (or no longer a candidate) is judged afresh.
func TestCandidateFinalDecisions(t *testing.T) {
	tr := NewTracker(Policy{ElectionTimeout: 100 * time.Millisecond, UnreachableRounds: 1})
	tr.Decide(epoch, Observation{Candidate: true, Reached: true, LeaderLast: 10})
	if d := tr.Decide(epoch.Add(time.Second), Observation{Candidate: true, LeaderLast: 10}); d.Action != Stalled || d.Reason != ReasonUnreachable {
		t.Fatalf("%v, want stalled unreachable", d)
	}
	if d := tr.Decide(epoch.Add(2*time.Second), Observation{Candidate: true, Reached: true, LeaderLast: 10, LastIndex: 10}); d.Action != Stalled {
		t.Fatalf("a stalled candidate became %v", d)
	}
	if d := tr.Decide(epoch.Add(3*time.Second), Observation{Voter: true, Reached: true, LeaderLast: 10, LastIndex: 10}); d.Action != CaughtUp {
		t.Fatalf("the member as a voter: %v", d)
	}
}

func TestStaleLastIndex(t *testing.T) {
	for _, tc := range []struct {
		name                                 string
		last, lastTerm, logLast, snap, snapT uint64
		want                                 uint64
	}{
		{"healthy: last in the log", 10, 2, 10, 5, 1, 0},
		{"empty log, last is the snapshot", 10, 2, 0, 10, 2, 0},
		{"cache past an empty log and the snapshot (#697)", 12, 2, 0, 10, 3, 12},
		{"same index as the snapshot, another term", 10, 2, 0, 10, 3, 10},
		{"snapshot past the cache", 8, 2, 0, 10, 3, 0},
		{"cache past the log's last", 15, 3, 11, 10, 3, 15},
	} {
		if got := StaleLastIndex(tc.last, tc.lastTerm, tc.logLast, tc.snap, tc.snapT); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The follower asks only for an index stale on two consecutive ticks, and
// for the same one again only after the retry interval.
func TestStaleWatch(t *testing.T) {
	var w StaleWatch
	retry := time.Second
	steps := []struct {
		at    time.Duration
		stale uint64
		ask   uint64
		asked bool
	}{
		{0, 0, 0, false},
		{100 * time.Millisecond, 12, 0, false}, // first sight
		{200 * time.Millisecond, 12, 13, true}, // second: ask past it
		{300 * time.Millisecond, 12, 0, false}, // the leader is on it
		{1300 * time.Millisecond, 12, 13, false},
		{1400 * time.Millisecond, 14, 0, false}, // another index: first sight
		{1500 * time.Millisecond, 0, 0, false},  // healed
	}
	for i, s := range steps {
		got := w.Step(epoch.Add(s.at), s.stale, retry)
		if got != s.ask {
			t.Fatalf("step %d (stale %d): ask %d, want %d", i, s.stale, got, s.ask)
		}
		if s.asked {
			w.Asked(epoch.Add(s.at), s.stale)
		}
	}
}

// The leader's bound on a snapshot-past request: only a member, only what
// it proves, at most Max past the log, at most one per interval.
func TestCheckSnapshotPast(t *testing.T) {
	base := PastRequest{Want: 120, LeaderLast: 100, Member: true, Proven: 119, Now: epoch.Add(time.Minute), MinInterval: time.Second, Max: 1 << 20}
	for _, tc := range []struct {
		name     string
		mod      func(*PastRequest)
		barriers uint64
		err      error
	}{
		{"proven stale index", func(*PastRequest) {}, 20, nil},
		{"inside the log: a snapshot only", func(r *PastRequest) { r.Want = 50 }, 0, nil},
		{"not a member", func(r *PastRequest) { r.Member = false }, 0, ErrPastNotMember},
		{"past what it proves", func(r *PastRequest) { r.Want = 1 << 20 }, 0, ErrPastUnproven},
		{"zero", func(r *PastRequest) { r.Want = 0 }, 0, ErrPastUnproven},
		{"too far", func(r *PastRequest) { r.Max = 10 }, 0, ErrPastTooFar},
		{"too soon", func(r *PastRequest) { r.LastGranted = r.Now.Add(-time.Millisecond) }, 0, ErrPastRateLimited},
		{"after the interval", func(r *PastRequest) { r.LastGranted = r.Now.Add(-time.Second) }, 20, nil},
	} {
		r := base
		tc.mod(&r)
		got, err := CheckSnapshotPast(r)
		if got != tc.barriers || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, err, tc.barriers, tc.err)
		}
	}
}

func TestRateAndETA(t *testing.T) {
	var r Rate
	r.Window = time.Second
	r.Observe(epoch, 0)
	if got := r.Observe(epoch.Add(time.Second), 1000); got != 1000 {
		t.Fatalf("rate %v, want 1000/s", got)
	}
	if got := r.Observe(epoch.Add(1500*time.Millisecond), 1000); got != 500 {
		t.Fatalf("rate %v after an idle half window, want 500/s", got)
	}
	if got := r.Observe(epoch.Add(2*time.Second), 10); got != 0 {
		t.Fatalf("a counter that went back: %v, want 0", got)
	}
	if ETA(0, 0) != 0 || ETA(10, 0) != -1 || ETA(1000, 500) != 2*time.Second {
		t.Fatal("ETA")
	}
}
