package fsm

import (
	"bytes"
	"testing"
	"time"
)

// The failure chaos found (narrative-paused-and-skewed-leader): a job nak'd
// with a 1 ns delay under one leader, then a new leader whose clock is 2 s
// behind. By the stamps alone the job is no longer due for 2 s, and a claim
// made after its delay passed leases nothing. By the log clock it is due.
func TestJobDueUnderOldLeaderStaysDueUnderSlowNewLeader(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	j := h.claim1("q", time.Minute)
	h.now = h.now.Add(time.Millisecond)
	h.ok(NakCmd{ID: "a", Token: j.Lease.Token, Delay: time.Nanosecond})

	h.term++
	h.now = h.now.Add(-2 * time.Second) // the new leader's clock
	// The claim is the new term's first entry: log time moves on by 1 ns.
	got := h.claim1("q", time.Minute)
	if got.ID != "a" {
		t.Fatalf("claimed %q", got.ID)
	}
	if want := baseTime.Add(time.Millisecond + 1); !got.Updated.Equal(want) {
		t.Fatalf("claim applied at log time %v, want %v", got.Updated, want)
	}
	// Then it runs at the new leader's rate from where the log was.
	h.ok(NakCmd{ID: "a", Token: got.Lease.Token, Delay: time.Nanosecond})
	h.now = h.now.Add(time.Millisecond)
	if !h.m.Claimable([]string{"q"}, nil, h.now) {
		t.Fatal("Claimable: the nak'd job is not due by the slow leader's clock translated to log time")
	}
	if got = h.claim1("q", time.Minute); !got.Updated.Equal(baseTime.Add(2*time.Millisecond + 1)) {
		t.Fatalf("second claim at log time %v, want %v", got.Updated, baseTime.Add(2*time.Millisecond+1))
	}
}

// A leader whose clock is stepped back within its term: log time pauses
// until the clock is past its highest stamp, then runs on; stamps out of
// order (concurrent proposals) count once.
func TestLogClockWithinATerm(t *testing.T) {
	var c logClock
	steps := []struct {
		term        uint64
		stamp, want int64
	}{
		{1, 1000, 1000},
		{1, 1500, 1500},
		{1, 1400, 1500}, // out of order: holds
		{1, 1600, 1600}, // counts from 1500 once, not from 1400
		{1, 600, 1600},  // stepped back 1 s: holds
		{1, 1700, 1700}, // past the highest again: runs on
		{2, 200, 1701},  // a slow leader: starts just past where the log is
		{2, 300, 1801},  // and runs at its rate
		{3, 5000, 5000}, // a fast one moves time on
		{3, 5001, 5001},
	}
	for i, s := range steps {
		if at := c.at(s.stamp); c.term == s.term && at != s.want {
			t.Fatalf("step %d: at(%d) = %d before the entry, want %d", i, s.stamp, at, s.want)
		}
		if got := c.advance(s.term, s.stamp); got != s.want {
			t.Fatalf("step %d (term %d, stamp %d): log time %d, want %d", i, s.term, s.stamp, got, s.want)
		}
	}
	if c.office != 5000 {
		t.Fatalf("office %d, want 5000 (term 3's first entry)", c.office)
	}
}

// Expiry safety with the log clock: after a fast leader, a correct one's
// log time runs ahead of its clock by the old offset, but an earlier term's
// lease expires only after the new leader has been in office a whole TTL on
// its own clock (both by log time since its first entry and by its stamps
// since its LeaderSince).
func TestExpiryAfterFastLeaderWaitsAFullTTLInOffice(t *testing.T) {
	h := newHarness(t)
	h.now = baseTime.Add(time.Hour) // the old leader is an hour fast
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	ttl := 10 * time.Second
	h.claim1("q", ttl)
	h.term++
	h.now = baseTime.Add(time.Second) // the new leader's true clock
	since := h.now
	for _, dt := range []time.Duration{0, ttl / 2, ttl - 1} {
		h.now = since.Add(dt)
		if r := h.ok(ExpireCmd{LeaderSince: since, Term: h.term}); len(r.Expired) != 0 {
			t.Fatalf("%v in office: expired %v", dt, r.Expired)
		}
	}
	h.now = since.Add(ttl)
	if r := h.ok(ExpireCmd{LeaderSince: since, Term: h.term}); len(r.Expired) != 1 {
		t.Fatalf("a TTL in office: expired %v, want [a]", r.Expired)
	}
	// A LeaderSince later than the term's first entry is the binding one.
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k"})
	h.claim1("q", ttl)
	h.term++
	h.ok(PauseCmd{Queue: "x"}) // the term's first entry, now
	late := h.now.Add(5 * time.Second)
	h.now = late.Add(ttl - 1)
	if r := h.ok(ExpireCmd{LeaderSince: late, Term: h.term}); len(r.Expired) != 0 {
		t.Fatalf("expired %v before a TTL since LeaderSince", r.Expired)
	}
	h.now = late.Add(ttl)
	if r := h.ok(ExpireCmd{LeaderSince: late, Term: h.term}); len(r.Expired) != 1 {
		t.Fatalf("expired %v, want [b]", r.Expired)
	}
}

// The log clock is state: a snapshot carries it, the digest covers it, and a
// restored instance applies the next entries at the same log times.
func TestLogClockInSnapshotAndDigest(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	h.term++
	h.now = h.now.Add(-time.Minute) // a slow leader: log time ahead of stamps
	h.ok(PauseCmd{Queue: "x"})
	var buf bytes.Buffer
	snap, _ := h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r.Digest() != h.m.Digest() {
		t.Fatal("restored digest differs")
	}
	h2 := &harness{t: t, m: r, index: h.index, term: h.term, now: h.now}
	h.now, h2.now = h.now.Add(time.Second), h2.now.Add(time.Second)
	a, b := h.claim1("q", time.Minute), h2.claim1("q", time.Minute)
	if want := baseTime.Add(time.Second + 1); !a.Updated.Equal(b.Updated) || !a.Updated.Equal(want) {
		t.Fatalf("claim at log time %v original, %v restored, want %v", a.Updated, b.Updated, want)
	}
	// Two states equal but for the clock have different digests.
	x, y := New(), New()
	x.Apply(Entry{Index: 1, Term: 1, Time: baseTime, Cmd: appendCommand(nil, &PauseCmd{Queue: "p"})})
	y.Apply(Entry{Index: 1, Term: 1, Time: baseTime.Add(1), Cmd: appendCommand(nil, &PauseCmd{Queue: "p"})})
	if x.Digest() == y.Digest() {
		t.Fatal("the digest ignores the log clock")
	}
	// A corrupt clock (office after now) is refused.
	b2 := append([]byte(nil), buf.Bytes()...)
	const hdr = 8 + 2 + 8 + 8
	b2[hdr+24] ^= 0x40 // office's high byte
	if err := New().Restore(bytes.NewReader(b2)); !IsCorrupt(err) {
		t.Fatalf("flipped clock: %v, want corrupt", err)
	}
}

// A new leader whose LeaderSince is earlier than its term's first entry
// (it took office, by its clock, long before it proposed anything the state
// machine sees) still waits a whole lease TTL of log time from that first
// entry before it expires a lease of an earlier term: by its stamps since
// LeaderSince it has been in office for an hour, by log time not yet.
func TestExpiryWithAnEarlyLeaderSinceWaitsAFullTTLOfLogTime(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	ttl := 10 * time.Second
	h.claim1("q", ttl)
	h.term++
	h.now = baseTime.Add(2 * time.Hour)
	since := h.now.Add(-time.Hour) // an hour before the term's first entry
	h.ok(PauseCmd{Queue: "x"})     // the term's first entry: log time starts at its stamp
	first := h.now
	for _, dt := range []time.Duration{0, ttl / 2, ttl - 1} {
		h.now = first.Add(dt)
		if r := h.ok(ExpireCmd{LeaderSince: since, Term: h.term}); len(r.Expired) != 0 {
			t.Fatalf("%v of log time since the term's first entry (%v by stamps since LeaderSince): expired %v",
				dt, h.now.Sub(since), r.Expired)
		}
	}
	h.now = first.Add(ttl)
	if r := h.ok(ExpireCmd{LeaderSince: since, Term: h.term}); len(r.Expired) != 1 || r.Expired[0] != "a" {
		t.Fatalf("a TTL of log time since the term's first entry: expired %v, want [a]", r.Expired)
	}
}
