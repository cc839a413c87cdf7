package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type harness struct {
	t     *testing.T
	m     *Jobs
	index uint64
	term  uint64
	now   time.Time
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, m: New(), term: 1, now: baseTime}
}

// apply encodes c without validation (so refusal paths reach Apply).
func (h *harness) apply(c Command) Result {
	h.t.Helper()
	h.index++
	b := h.m.Apply(Entry{Index: h.index, Term: h.term, Time: h.now, Cmd: appendCommand(nil, normalize(c))})
	r, err := DecodeResult(b)
	if err != nil {
		h.t.Fatalf("decode result: %v", err)
	}
	return r
}

func (h *harness) ok(c Command) Result {
	h.t.Helper()
	r := h.apply(c)
	if err := r.Err(); err != nil {
		h.t.Fatalf("%s: %v", c.Type(), err)
	}
	return r
}

func (h *harness) refused(c Command, want error) Result {
	h.t.Helper()
	before := h.m.stateSum()
	r := h.apply(c)
	if !errors.Is(r.Err(), want) {
		h.t.Fatalf("%s: got %v, want %v", c.Type(), r.Err(), want)
	}
	if after := h.m.stateSum(); after != before {
		h.t.Fatalf("%s: refused command changed the state", c.Type())
	}
	return r
}

// stateSum is the digest without the applied index (a refusal advances it).
// stateSum is the digest without the log position (applied index and log
// clock), which every applied entry moves, refused or not.
func (m *Jobs) stateSum() [32]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, c := m.st.index, m.st.clock
	m.st.index, m.st.clock = 0, logClock{}
	s := m.st.sum()
	m.st.index, m.st.clock = i, c
	return s
}

func (h *harness) submit(nj NewJob) Job {
	h.t.Helper()
	r := h.ok(SubmitCmd{Jobs: []NewJob{nj}})
	if s := r.Submitted[0]; s.Outcome != OutcomeCreated {
		h.t.Fatalf("submit %q: %s %v", nj.ID, s.Outcome, s.Err())
	}
	return r.Submitted[0].Job
}

func (h *harness) claim1(queue string, ttl time.Duration) Job {
	h.t.Helper()
	r := h.ok(ClaimCmd{Queues: []string{queue}, Worker: "w", Max: 1, TTL: ttl})
	if len(r.Jobs) != 1 {
		h.t.Fatalf("claim %s: %d jobs", queue, len(r.Jobs))
	}
	return r.Jobs[0]
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Payload: []byte("p"), MaxAttempts: 2, Backoff: Backoff{Base: time.Second}})
	j := h.claim1("q", time.Minute)
	if j.State != StateRunning || j.Attempts != 1 || j.Lease.Token != h.index || string(j.Payload) != "p" {
		t.Fatalf("claimed %+v", j)
	}
	r := h.ok(NakCmd{ID: "a", Token: j.Lease.Token, Error: "boom"})
	if got := r.Jobs[0]; got.State != StateScheduled || !got.RunAt.Equal(h.now.Add(time.Second)) || got.LastError != "boom" {
		t.Fatalf("after nak %+v", got)
	}
	if r := h.ok(ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute}); len(r.Jobs) != 0 {
		t.Fatalf("claimed a job before its backoff ended")
	}
	h.now = h.now.Add(time.Second)
	j = h.claim1("q", time.Minute)
	r = h.ok(AckCmd{ID: "a", Token: j.Lease.Token, Result: []byte("done")})
	if got := r.Jobs[0]; got.State != StateSucceeded || string(got.Result) != "done" || got.Finished != h.now || got.Lease != nil {
		t.Fatalf("after ack %+v", got)
	}
	if q, _ := h.m.Queue("q"); q.Counts != (Counts{Succeeded: 1}) {
		t.Fatalf("counts %+v", q.Counts)
	}
}

func TestClaimOrderAndPause(t *testing.T) {
	h := newHarness(t)
	h.ok(SubmitCmd{Jobs: []NewJob{
		{ID: "low", Queue: "a", Kind: "k"},
		{ID: "high", Queue: "b", Kind: "k", Priority: 5},
		{ID: "later", Queue: "a", Kind: "k", RunAt: h.now.Add(time.Minute), Priority: 9},
		{ID: "low2", Queue: "a", Kind: "k"},
	}})
	r := h.ok(ClaimCmd{Queues: []string{"a", "b", "a"}, Worker: "w", Max: 10, TTL: time.Minute})
	var ids []string
	for _, j := range r.Jobs {
		ids = append(ids, j.ID)
	}
	if strings.Join(ids, ",") != "high,low,low2" {
		t.Fatalf("claim order %v", ids)
	}
	h.ok(PauseCmd{Queue: "a"})
	h.now = h.now.Add(time.Minute)
	h.refused(ClaimCmd{Queues: []string{"a"}, Worker: "w", Max: 1, TTL: time.Minute}, ErrQueuePaused)
	h.ok(ResumeCmd{Queue: "a"})
	if j := h.claim1("a", time.Minute); j.ID != "later" {
		t.Fatalf("claimed %s after run-at", j.ID)
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	first := h.claim1("q", time.Second)
	h.now = h.now.Add(2 * time.Second)
	if r := h.ok(ExpireCmd{LeaderSince: baseTime}); len(r.Expired) != 1 {
		t.Fatalf("expired %v", r.Expired)
	}
	h.now = h.now.Add(time.Hour)
	second := h.claim1("q", time.Minute)
	stale := first.Lease.Token
	for _, c := range []Command{
		AckCmd{ID: "a", Token: stale}, NakCmd{ID: "a", Token: stale}, ExtendCmd{ID: "a", Token: stale},
		TermCmd{ID: "a", Token: stale},
	} {
		h.refused(c, ErrStaleLease)
	}
	// Canceling a running job fences its lease too.
	h.ok(CancelCmd{ID: "a"})
	h.refused(AckCmd{ID: "a", Token: second.Lease.Token}, ErrStaleLease)
	if j, _ := h.m.Get("a"); j.State != StateCanceled {
		t.Fatalf("state %s", j.State)
	}
}

func TestIdempotency(t *testing.T) {
	h := newHarness(t)
	nj := NewJob{Queue: "q", Kind: "k", IdempotencyKey: "order-7"}
	first := h.ok(SubmitCmd{Jobs: []NewJob{nj, nj}})
	if first.Submitted[0].Outcome != OutcomeCreated || first.Submitted[1].Outcome != OutcomeDuplicate ||
		first.Submitted[1].Job.ID != first.Submitted[0].Job.ID {
		t.Fatalf("batch %+v", first.Submitted)
	}
	// A retried submit (new entry, a different derived ID) is a duplicate.
	again := h.ok(SubmitCmd{Jobs: []NewJob{nj}})
	if s := again.Submitted[0]; s.Outcome != OutcomeDuplicate || s.Job.ID != first.Submitted[0].Job.ID {
		t.Fatalf("retry %+v", s)
	}
	// An explicit ID is an idempotency key too.
	h.submit(NewJob{ID: "x", Queue: "q", Kind: "k"})
	if s := h.ok(SubmitCmd{Jobs: []NewJob{{ID: "x", Queue: "other", Kind: "k"}}}).Submitted[0]; s.Outcome != OutcomeDuplicate || s.Job.Queue != "q" {
		t.Fatalf("id duplicate %+v", s)
	}
	if h.m.Len() != 2 {
		t.Fatalf("%d jobs", h.m.Len())
	}
	// The key lives as long as its job: once swept, it may be reused.
	id := first.Submitted[0].Job.ID
	h.ok(CancelCmd{ID: id})
	h.now = h.now.Add(time.Hour)
	h.ok(SweepCmd{MaxAge: time.Minute})
	if s := h.ok(SubmitCmd{Jobs: []NewJob{nj}}).Submitted[0]; s.Outcome != OutcomeCreated || s.Job.ID == id {
		t.Fatalf("after sweep %+v", s)
	}
}

func TestExpiryAfterElection(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", MaxAttempts: 1})
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k"})
	ttl := 10 * time.Second
	a := h.claim1("q", ttl)
	// Same leader: deadline passed is enough.
	h.now = h.now.Add(ttl - 1)
	if r := h.ok(ExpireCmd{LeaderSince: baseTime}); len(r.Expired) != 0 {
		t.Fatalf("expired before deadline")
	}
	_ = a
	b := h.claim1("q", ttl)
	// New leader, clock 1h ahead: the old leases' deadlines look long past,
	// but the new leader has not been in office for a TTL yet.
	h.term++
	h.now = h.now.Add(time.Hour)
	since := h.now
	if r := h.ok(ExpireCmd{LeaderSince: since}); len(r.Expired) != 0 {
		t.Fatalf("new leader expired %v before a TTL in office", r.Expired)
	}
	h.now = since.Add(ttl - 1)
	if r := h.ok(ExpireCmd{LeaderSince: since}); len(r.Expired) != 0 {
		t.Fatalf("expired %v one ns early", r.Expired)
	}
	h.now = since.Add(ttl)
	r := h.ok(ExpireCmd{LeaderSince: since})
	if strings.Join(r.Expired, ",") != "a,b" {
		t.Fatalf("expired %v", r.Expired)
	}
	ja, _ := h.m.Get("a")
	jb, _ := h.m.Get("b")
	if ja.State != StateDead || jb.State != StateScheduled || jb.LastError != leaseExpiredMsg || jb.Attempts != 1 {
		t.Fatalf("after expiry a=%+v b=%+v", ja, jb)
	}
	h.refused(AckCmd{ID: "b", Token: b.Lease.Token}, ErrStaleLease)
	// A lease granted (or extended) in the current term needs only its deadline.
	h.now = h.now.Add(time.Hour)
	c := h.claim1("q", ttl)
	h.ok(ExtendCmd{ID: "b", Token: c.Lease.Token, TTL: time.Second})
	h.now = h.now.Add(time.Second)
	if r := h.ok(ExpireCmd{LeaderSince: since}); len(r.Expired) != 1 {
		t.Fatalf("same-term lease not expired: %v", r.Expired)
	}
	// A future term's lease is never expired by an older-term entry.
	if !expirable(&lease{deadline: 0, term: 3, ttl: 1}, 100, 3, 0) || expirable(&lease{term: 4, ttl: 1}, 100, 3, 0) {
		t.Fatal("expirable term rule")
	}
	// An expire proposed for one term but appended in another (leadership
	// lost and regained in between) is refused: its LeaderSince belongs to
	// the other term's office. Nothing changes.
	h.submit(NewJob{ID: "d", Queue: "q", Kind: "k"})
	h.claim1("q", time.Second)
	h.now = h.now.Add(time.Hour)
	h.refused(ExpireCmd{LeaderSince: since, Term: h.term - 1}, ErrInvalidState) // state unchanged: checked by refused
	if r := h.ok(ExpireCmd{LeaderSince: since, Term: h.term}); len(r.Expired) == 0 {
		t.Fatal("expire for the current term refused or expired nothing")
	}
}

func TestRetention(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		h.submit(NewJob{ID: id, Queue: "q", Kind: "k", IdempotencyKey: "key-" + id})
		j := h.claim1("q", time.Minute)
		h.ok(AckCmd{ID: j.ID, Token: j.Lease.Token})
		h.now = h.now.Add(time.Minute)
	}
	h.submit(NewJob{ID: "live", Queue: "q", Kind: "k"})
	// a finished 4 min ago, b 3, c 2, d 1.
	if r := h.ok(SweepCmd{MaxAge: 3 * time.Minute}); r.Removed != 2 {
		t.Fatalf("age sweep removed %d", r.Removed)
	}
	if r := h.ok(SweepCmd{MaxPerQueue: 1}); r.Removed != 1 {
		t.Fatalf("count sweep removed %d", r.Removed)
	}
	for id, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true, "live": true} {
		if _, ok := h.m.Get(id); ok != want {
			t.Fatalf("%s present=%v", id, ok)
		}
	}
	if s := h.ok(SubmitCmd{Jobs: []NewJob{{Queue: "q", Kind: "k", IdempotencyKey: "key-a"}}}).Submitted[0]; s.Outcome != OutcomeCreated {
		t.Fatalf("swept key still known: %+v", s)
	}
	h.refused(RetryCmd{ID: "a"}, ErrNotFound)
}

func TestRetryAndCancel(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	j := h.claim1("q", time.Minute)
	h.refused(RetryCmd{ID: "a"}, ErrInvalidState)
	h.ok(TermCmd{ID: "a", Token: j.Lease.Token, Reason: "poison"})
	h.refused(CancelCmd{ID: "a"}, ErrInvalidState)
	r := h.ok(RetryCmd{ID: "a"})
	if got := r.Jobs[0]; got.State != StatePending || got.Attempts != 0 || got.LastError != "poison" {
		t.Fatalf("retried %+v", got)
	}
	h.ok(CancelCmd{ID: "a", Reason: "nope"})
	h.ok(RetryCmd{ID: "a"})
	j = h.claim1("q", time.Minute)
	h.ok(AckCmd{ID: "a", Token: j.Lease.Token})
	h.refused(RetryCmd{ID: "a"}, ErrInvalidState)
	h.refused(CancelCmd{ID: "a"}, ErrInvalidState)
}

func TestDeterminism(t *testing.T) {
	a, b := New(), New()
	h := newHarness(t)
	h.m = a
	for i := 0; i < 50; i++ {
		h.submit(NewJob{Queue: []string{"x", "y"}[i%2], Kind: "k", Priority: int32(i % 3), Backoff: Backoff{Jitter: 50}})
	}
	for i := 0; i < 20; i++ {
		h.now = h.now.Add(time.Second)
		r := h.ok(ClaimCmd{Queues: []string{"x", "y"}, Worker: "w", Max: 3, TTL: 2 * time.Second})
		for k, j := range r.Jobs {
			if k == 0 {
				h.ok(NakCmd{ID: j.ID, Token: j.Lease.Token})
			}
		}
		h.ok(ExpireCmd{LeaderSince: baseTime})
	}
	// Run the same script on b: same entries, so equal digests.
	h2 := newHarness(t)
	h2.m = b
	for i := 0; i < 50; i++ {
		h2.submit(NewJob{Queue: []string{"x", "y"}[i%2], Kind: "k", Priority: int32(i % 3), Backoff: Backoff{Jitter: 50}})
		if a2 := h2.m.Digest(); a2.Index != h2.index {
			t.Fatal("digest index")
		}
	}
	for i := 0; i < 20; i++ {
		h2.now = h2.now.Add(time.Second)
		r := h2.ok(ClaimCmd{Queues: []string{"x", "y"}, Worker: "w", Max: 3, TTL: 2 * time.Second})
		for k, j := range r.Jobs {
			if k == 0 {
				h2.ok(NakCmd{ID: j.ID, Token: j.Lease.Token})
			}
		}
		h2.ok(ExpireCmd{LeaderSince: baseTime})
	}
	if a.Digest() != b.Digest() {
		t.Fatal("same entries, different digests")
	}
}

// TestSnapshotWhileApplying persists a snapshot on another goroutine while
// the apply goroutine keeps mutating (and queries run): the restored state
// must be exactly the state at the snapshot's index.
func TestSnapshotWhileApplying(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 300; i++ {
		h.submit(NewJob{Queue: "q", Kind: "k", Payload: []byte("payload"), IdempotencyKey: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	snap, err := h.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	at := h.m.Digest()
	var buf bytes.Buffer
	var wg sync.WaitGroup
	var perr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		perr = snap.Persist(&buf)
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			_, _ = h.m.List(ListQuery{Queue: "q", State: StateRunning})
			_ = h.m.Digest()
		}
	}()
	for i := 0; i < 100; i++ {
		h.now = h.now.Add(time.Second)
		r := h.ok(ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Second})
		h.ok(AckCmd{ID: r.Jobs[0].ID, Token: r.Jobs[0].Lease.Token})
		h.ok(SweepCmd{MaxPerQueue: 5})
	}
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	snap.Release()
	r := New()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if r.Digest() != at || r.Len() != 300 {
		t.Fatalf("restored %d jobs, digest match %v", r.Len(), r.Digest() == at)
	}
}

func TestRestoreRejectsCorruption(t *testing.T) {
	h := newHarness(t)
	h.ok(PauseCmd{Queue: "p"})
	for i := 0; i < 5; i++ {
		h.submit(NewJob{Queue: "q", Kind: "k", Payload: []byte("abc")})
	}
	h.claim1("q", time.Minute)
	snap, _ := h.m.Snapshot()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	target := New()
	tgt := newHarness(t)
	tgt.m = target
	tgt.submit(NewJob{ID: "keep", Queue: "z", Kind: "k"})
	want := target.Digest()
	for i := 0; i < len(good); i++ {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x10
		err := target.Restore(bytes.NewReader(bad))
		if err == nil || !(IsCorrupt(err) || errors.Is(err, ErrSnapshotVersion)) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	for _, n := range []int{0, 5, 30, len(good) - 1} {
		if err := target.Restore(bytes.NewReader(good[:n])); !IsCorrupt(err) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
	if err := target.Restore(bytes.NewReader(append(append([]byte(nil), good...), 0))); !IsCorrupt(err) {
		t.Fatalf("trailing byte: %v", err)
	}
	if target.Digest() != want {
		t.Fatal("a failed restore changed the state")
	}
	if err := target.Restore(bytes.NewReader(good)); err != nil || target.Digest() != h.m.Digest() {
		t.Fatalf("good restore: %v", err)
	}
	if q, _ := target.Queue("p"); !q.Paused {
		t.Fatal("paused queue lost")
	}
}

func TestListCursor(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 7; i++ {
		h.submit(NewJob{Queue: "q", Kind: "k", Priority: int32(i % 3)})
	}
	if _, err := h.m.List(ListQuery{Queue: "q", State: StatePending, Cursor: "nope"}); !errors.Is(err, ErrInvalidCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
	if _, err := h.m.List(ListQuery{Queue: "q"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("no state: %v", err)
	}
	p, _ := h.m.List(ListQuery{Queue: "q", State: StatePending, Limit: 3})
	if len(p.Jobs) != 3 || p.Jobs[0].Priority != 2 || p.Next == "" {
		t.Fatalf("page %+v", p)
	}
}

func TestCodes(t *testing.T) {
	for c := CodeOK + 1; c < numCodes; c++ {
		if codeOf(c.Err()) != c || c.String() == "" {
			t.Errorf("code %d does not round-trip", c)
		}
	}
	if Code(200).Err() == nil || CodeOK.Err() != nil {
		t.Error("code errors")
	}
}

// List cursors keep their form, "-priority.run-at.seq" for a pending job
// and "time.0.seq" for the others, whatever the index's item layout, and
// any cursor, given out or not, pages strictly after its place in that
// order: out-of-range priorities and a non-zero middle number included.
func TestListCursorForm(t *testing.T) {
	h := newHarness(t)
	for _, p := range []int32{math.MinInt32, -1, 0, 5, math.MaxInt32} {
		for range 2 {
			h.submit(NewJob{Queue: "q", Kind: "k", Priority: p})
		}
	}
	for range 3 {
		h.submit(NewJob{Queue: "d", Kind: "k"})
		h.now = h.now.Add(time.Second)
	}
	for range 3 {
		j := h.claim1("d", time.Minute)
		h.ok(AckCmd{ID: j.ID, Token: j.Lease.Token})
		h.now = h.now.Add(time.Second)
	}
	type key struct {
		a, b int64
		seq  uint64
	}
	keyOf := func(j Job, s State) key {
		if s == StatePending {
			return key{-int64(j.Priority), j.RunAt.UnixNano(), j.Seq}
		}
		return key{j.Finished.UnixNano(), 0, j.Seq}
	}
	less := func(x, y key) bool {
		if x.a != y.a {
			return x.a < y.a
		}
		if x.b != y.b {
			return x.b < y.b
		}
		return x.seq < y.seq
	}
	for _, tc := range []struct {
		queue string
		state State
	}{{"q", StatePending}, {"d", StateSucceeded}} {
		all, err := h.m.List(ListQuery{Queue: tc.queue, State: tc.state, Limit: 100})
		if err != nil || len(all.Jobs) == 0 {
			t.Fatalf("list %s: %v %+v", tc.queue, err, all)
		}
		var cursors []key
		for i, j := range all.Jobs {
			k := keyOf(j, tc.state)
			if i > 0 && !less(keyOf(all.Jobs[i-1], tc.state), k) {
				t.Fatalf("%s: jobs out of cursor order: %+v before %+v", tc.queue, all.Jobs[i-1], j)
			}
			p, err := h.m.List(ListQuery{Queue: tc.queue, State: tc.state, Limit: i + 1})
			want := fmt.Sprintf("%d.%d.%d", k.a, k.b, k.seq)
			if i == len(all.Jobs)-1 {
				want = ""
			}
			if err != nil || p.Next != want {
				t.Fatalf("%s: cursor after job %d is %q (%v), want %q", tc.queue, i, p.Next, err, want)
			}
			cursors = append(cursors, k, key{k.a, k.b - 1, k.seq}, key{k.a, k.b + 1, k.seq}, key{k.a - 1, k.b, k.seq}, key{k.a + 1, k.b, k.seq})
		}
		cursors = append(cursors, key{math.MinInt64, 0, 0}, key{math.MaxInt64, 0, 0}, key{-math.MaxInt32 - 1, 0, 0},
			key{-math.MinInt32 + 1, 0, 0}, key{-math.MinInt32, math.MaxInt64, math.MaxUint64}, key{-math.MaxInt32, math.MinInt64, 0})
		for _, c := range cursors {
			cur := fmt.Sprintf("%d.%d.%d", c.a, c.b, c.seq)
			p, err := h.m.List(ListQuery{Queue: tc.queue, State: tc.state, Cursor: cur, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, j := range all.Jobs {
				if less(c, keyOf(j, tc.state)) {
					want = append(want, j.ID)
				}
			}
			var got []string
			for _, j := range p.Jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: after cursor %s: %v, want %v", tc.queue, cur, got, want)
			}
		}
	}
}
