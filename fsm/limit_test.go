package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func (h *harness) limits(queue string) QueueLimits {
	h.t.Helper()
	ql, ok := h.m.QueueLimit(queue, h.now)
	if !ok {
		h.t.Fatalf("queue %q has no limits", queue)
	}
	return ql
}

func (h *harness) claimN(queue, worker string, n uint32, kinds ...string) []Job {
	h.t.Helper()
	return h.ok(ClaimCmd{Queues: []string{queue}, Worker: worker, Max: n, TTL: time.Minute, Kinds: kinds}).Jobs
}

// A queue's limit holds across claims of different workers: a claim
// leases at most limit − running jobs, one at the limit leases none and is
// counted limited, and a job that finishes makes room for exactly one.
func TestLimitHoldsAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		h.submit(NewJob{ID: id, Queue: "q", Kind: "k"})
	}
	if r := h.ok(SetLimitCmd{Queue: "q", Max: 2}); !r.Changed {
		t.Fatal("setting a new limit did not change the state")
	}
	if got := h.claimN("q", "w1", 1); len(got) != 1 {
		t.Fatalf("w1 leased %d, want 1", len(got))
	}
	got := h.claimN("q", "w2", 5)
	if len(got) != 1 {
		t.Fatalf("w2 leased %d with one running under a limit of 2, want 1", len(got))
	}
	if got := h.claimN("q", "w3", 5); len(got) != 0 {
		t.Fatalf("w3 leased %d at the limit", len(got))
	}
	if ql := h.limits("q"); ql.Running != 2 || ql.Limited != 2 || ql.RateLimited != 0 {
		t.Fatalf("limits %+v, want 2 running, 2 limited claims (w2's and w3's)", ql)
	}
	h.ok(AckCmd{ID: got[0].ID, Token: got[0].Lease.Token})
	if got := h.claimN("q", "w3", 5); len(got) != 1 {
		t.Fatalf("after an ack w3 leased %d, want 1", len(got))
	}
	// Lowering the limit below the running jobs lets them run and leases
	// nothing more until fewer run.
	h.ok(SetLimitCmd{Queue: "q", Max: 1})
	if got := h.claimN("q", "w4", 5); len(got) != 0 {
		t.Fatalf("leased %d above a lowered limit", len(got))
	}
	h.ok(ClearLimitCmd{Queue: "q"})
	if _, ok := h.m.QueueLimit("q", h.now); ok {
		t.Fatal("a queue whose last limit was cleared still reports limits")
	}
	if got := h.claimN("q", "w4", 5); len(got) != 2 {
		t.Fatalf("without a limit leased %d, want the 2 pending", len(got))
	}
}

// A kind's limit passes over that kind's jobs (left unchanged) and leases
// the queue's other kinds, for claims that name kinds and those that do
// not.
func TestKindLimitPassesOverKind(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a1", Queue: "q", Kind: "a", Priority: 9})
	h.submit(NewJob{ID: "a2", Queue: "q", Kind: "a", Priority: 9})
	h.submit(NewJob{ID: "b1", Queue: "q", Kind: "b"})
	h.ok(SetLimitCmd{Queue: "q", Kind: "a", Max: 1})
	before, _ := h.m.Get("a2")
	got := h.claimN("q", "w", 3)
	if len(got) != 2 || got[0].ID != "a1" || got[1].ID != "b1" {
		t.Fatalf("leased %v, want a1 then b1", ids(got))
	}
	if after, _ := h.m.Get("a2"); after.State != StatePending || after.Updated != before.Updated || after.Attempts != 0 {
		t.Fatalf("a2 passed over but changed: %+v", after)
	}
	if got := h.claimN("q", "w", 3, "a"); len(got) != 0 {
		t.Fatalf("a claim of kind a leased %v at a's limit", ids(got))
	}
	ql := h.limits("q")
	if ql.Limited != 2 || len(ql.Kinds) != 1 || ql.Kinds[0].Running != 1 || ql.Running != 2 {
		t.Fatalf("limits %+v", ql)
	}
	if h.m.Claimable([]string{"q"}, nil, h.now) || h.m.Claimable([]string{"q"}, []string{"a"}, h.now) {
		t.Fatal("Claimable with only a kind at its limit pending")
	}
}

// An expired lease counts against the limit until the expire command ends
// it, never before: its deadline passing frees nothing.
func TestExpiredLeaseCountsUntilExpired(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k"})
	h.ok(SetLimitCmd{Queue: "q", Max: 1})
	h.claim1("q", time.Second)
	h.now = h.now.Add(time.Hour)
	if got := h.claimN("q", "w", 1); len(got) != 0 {
		t.Fatal("a claim leased past a lease whose deadline passed but that did not expire")
	}
	if r := h.ok(ExpireCmd{LeaderSince: baseTime}); len(r.Expired) != 1 {
		t.Fatalf("expired %v", r.Expired)
	}
	if got := h.claimN("q", "w", 2); len(got) != 1 {
		t.Fatalf("after the expiry leased %d, want 1", len(got))
	}
}

// The rate's bucket runs on log time: Burst at once, then one per Every;
// claims beyond it lease nothing more from the queue and are counted.
func TestRateBucketOnLogTime(t *testing.T) {
	h := newHarness(t)
	for i := range 10 {
		h.submit(NewJob{ID: string(rune('a' + i)), Queue: "q", Kind: "k"})
	}
	h.ok(SetRateCmd{Queue: "q", Every: time.Second, Burst: 2})
	if got := h.claimN("q", "w", 5); len(got) != 2 {
		t.Fatalf("leased %d from a full bucket of 2", len(got))
	}
	h.now = h.now.Add(999 * time.Millisecond)
	if got := h.claimN("q", "w", 5); len(got) != 0 {
		t.Fatalf("leased %d before a token was back", len(got))
	}
	// Both claims had room for more: both were held back by the rate.
	if ql := h.limits("q"); ql.RateLimited != 2 || ql.Limited != 0 || ql.Rate.Tokens != 0 {
		t.Fatalf("limits %+v", ql)
	}
	h.now = h.now.Add(time.Millisecond)
	if got := h.claimN("q", "w", 5); len(got) != 1 {
		t.Fatalf("leased %d one interval later, want 1", len(got))
	}
	h.now = h.now.Add(time.Hour) // the bucket fills up to its burst, no more
	if got := h.claimN("q", "w", 5); len(got) != 2 {
		t.Fatalf("leased %d after an hour, want the burst of 2", len(got))
	}
	if r := h.ok(SetRateCmd{Queue: "q", Every: time.Second, Burst: 2}); r.Changed {
		t.Fatal("setting the same rate changed the state")
	}
	if r := h.ok(ClearRateCmd{Queue: "q"}); !r.Changed {
		t.Fatal("clearing the rate changed nothing")
	}
	if got := h.claimN("q", "w", 5); len(got) != 5 {
		t.Fatalf("without a rate leased %d, want 5", len(got))
	}
}

func ids(js []Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// Limit commands refuse a limit of 0, a rate interval or burst out of
// range and bad names, before and at apply, changing nothing.
func TestLimitRefusals(t *testing.T) {
	h := newHarness(t)
	for _, c := range []Command{
		SetLimitCmd{Queue: "q", Max: 0}, SetLimitCmd{Queue: "", Max: 1}, SetLimitCmd{Queue: "q", Kind: string(make([]byte, MaxNameLen+1)), Max: 1},
		SetRateCmd{Queue: "q", Every: -time.Second, Burst: 1}, SetRateCmd{Queue: "q", Every: 0, Burst: 1},
		SetRateCmd{Queue: "q", Every: time.Second, Burst: 0}, SetRateCmd{Queue: "q", Every: MaxDelay + 1, Burst: 1},
		SetRateCmd{Queue: "q", Every: time.Second, Burst: MaxRateBurst + 1}, ClearLimitCmd{}, ClearRateCmd{},
	} {
		if _, err := EncodeCommand(c); !errors.Is(err, ErrInvalidCommand) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("EncodeCommand(%+v) = %v", c, err)
		}
		r := h.apply(c)
		if r.Err() == nil {
			t.Errorf("%+v applied", c)
		}
	}
	if len(h.m.Limits(h.now)) != 0 {
		t.Fatal("refused limit commands left limits")
	}
}

// The digest covers every part of the limits (two states that differ
// only there differ), and a snapshot carries them, their bucket and
// counts included; a version 5 snapshot (no limits) still restores.
func TestLimitsDigestAndSnapshot(t *testing.T) {
	base := func() *harness {
		h := newHarness(t)
		h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
		h.submit(NewJob{ID: "b", Queue: "q", Kind: "k"})
		return h
	}
	variants := []Command{
		SetLimitCmd{Queue: "q", Max: 1}, SetLimitCmd{Queue: "q", Max: 2}, SetLimitCmd{Queue: "q", Kind: "k", Max: 1},
		SetLimitCmd{Queue: "r", Max: 1}, SetRateCmd{Queue: "q", Every: time.Second, Burst: 1},
		SetRateCmd{Queue: "q", Every: time.Second, Burst: 2}, SetRateCmd{Queue: "q", Every: 2 * time.Second, Burst: 1},
		PauseCmd{Queue: "q"},
	}
	seen := map[[32]byte]int{}
	for i, c := range variants {
		h := base()
		h.ok(c)
		d := h.m.stateSum()
		if j, dup := seen[d]; dup {
			t.Fatalf("variants %d and %d have one digest", j, i)
		}
		seen[d] = i
	}
	// A claim held back changes the state (its count) too.
	h := base()
	h.ok(SetLimitCmd{Queue: "q", Kind: "k", Max: 1})
	h.ok(SetRateCmd{Queue: "q", Every: time.Second, Burst: 5})
	h.claimN("q", "w", 2)
	before := h.m.stateSum()
	h.claimN("q", "w", 2)
	if h.m.stateSum() == before {
		t.Fatal("a limited claim left the digest unchanged")
	}
	var buf bytes.Buffer
	snap, _ := h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r.Digest() != h.m.Digest() || !equalLimits(r.Limits(h.now), h.m.Limits(h.now)) {
		t.Fatalf("restored limits %+v, want %+v", r.Limits(h.now), h.m.Limits(h.now))
	}
	// Version 5: the same layout without limits.
	plain := base()
	buf.Reset()
	snap, _ = plain.m.Snapshot()
	_ = snap.Persist(&buf)
	v5 := New()
	if err := v5.Restore(bytes.NewReader(setSnapVersion(plain.m, buf.Bytes(), 5))); err != nil || v5.Digest() != plain.m.Digest() {
		t.Fatalf("version 5 snapshot: %v", err)
	}
}

func equalLimits(a, b []QueueLimits) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Queue != y.Queue || x.Max != y.Max || x.Running != y.Running || x.Limited != y.Limited || x.RateLimited != y.RateLimited ||
			len(x.Kinds) != len(y.Kinds) || (x.Rate == nil) != (y.Rate == nil) || (x.Rate != nil && *x.Rate != *y.Rate) {
			return false
		}
		for k := range x.Kinds {
			if x.Kinds[k] != y.Kinds[k] {
				return false
			}
		}
	}
	return true
}

// Restore refuses limits records that break the format's rules: in a
// version 5 stream, out of order, after the jobs, or invalid.
func TestRestoreRefusesBadLimits(t *testing.T) {
	persist := func(st func(*state)) []byte {
		h := newHarness(t)
		h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
		h.ok(SetLimitCmd{Queue: "q", Max: 1})
		h.ok(SetLimitCmd{Queue: "r", Max: 1})
		h.m.mu.Lock()
		st(h.m.st)
		h.m.mu.Unlock()
		snap, _ := h.m.Snapshot()
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	good := persist(func(*state) {})
	if err := New().Restore(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"version 5":  setSnapVersion(New(), good, 5),
		"limit 0":    persist(func(st *state) { l := st.limitOf("q"); l.max = 0; l.kinds = []kindLimit{{kind: "k"}} }),
		"rate alone": persist(func(st *state) { st.limitOf("q").burst = 3 }),
		"bad order": persist(func(st *state) {
			st.limits.Scan(func(l *qlimit) bool { l.queue = "z" + l.queue; return true }) // q→zq, r→zr: still ordered
			st.limitOf("zr").queue = "a"
		}),
	} {
		if err := New().Restore(bytes.NewReader(b)); !IsCorrupt(err) {
			t.Errorf("%s: %v, want a corrupt snapshot", name, err)
		}
	}
}
