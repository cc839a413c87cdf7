package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func (h *harness) submitOutcome(nj NewJob) Submitted {
	h.t.Helper()
	return h.ok(SubmitCmd{Jobs: []NewJob{nj}}).Submitted[0]
}

// A unique submit whose key a job holds is answered duplicate naming that
// job and creates nothing; another payload, kind or queue is another key.
func TestUniqueDuplicateNamesHolder(t *testing.T) {
	h := newHarness(t)
	u := &UniqueOpts{}
	first := h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u})
	if first.Unique == nil || !first.Unique.Held || first.Unique.States != DefaultUniqueStates {
		t.Fatalf("created job's key %+v", first.Unique)
	}
	s := h.submitOutcome(NewJob{ID: "b", Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u})
	if s.Outcome != OutcomeDuplicate || s.Job.ID != "a" {
		t.Fatalf("second submit: %s %q, want duplicate of a", s.Outcome, s.Job.ID)
	}
	if _, ok := h.m.Get("b"); ok {
		t.Fatal("the duplicate created a job")
	}
	for _, nj := range []NewJob{
		{ID: "c", Queue: "q", Kind: "k", Payload: []byte("y"), Unique: u},
		{ID: "d", Queue: "q", Kind: "k2", Payload: []byte("x"), Unique: u},
		{ID: "e", Queue: "q2", Kind: "k", Payload: []byte("x"), Unique: u},
		{ID: "f", Queue: "q", Kind: "k", Payload: []byte("x")}, // not unique
	} {
		h.submit(nj)
	}
	// Within one submit: the second job is a duplicate of the first.
	r := h.ok(SubmitCmd{Jobs: []NewJob{{ID: "g", Queue: "q", Kind: "k", Payload: []byte("z"), Unique: u}, {ID: "h", Queue: "q", Kind: "k", Payload: []byte("z"), Unique: u}}})
	if r.Submitted[0].Outcome != OutcomeCreated || r.Submitted[1].Outcome != OutcomeDuplicate || r.Submitted[1].Job.ID != "g" {
		t.Fatalf("one batch: %+v", r.Submitted)
	}
}

// The key frees when the job enters a state not chosen, for good: a new
// job takes it, and the first, retried, does not take it back.
func TestUniqueKeyFreesForGood(t *testing.T) {
	h := newHarness(t)
	u := &UniqueOpts{} // default: not dead, not canceled
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Unique: u})
	run := h.claim1("q", time.Minute)
	h.ok(NakCmd{ID: "a", Token: run.Lease.Token, Delay: time.Hour}) // scheduled: still held
	if s := h.submitOutcome(NewJob{ID: "b", Queue: "q", Kind: "k", Unique: u}); s.Outcome != OutcomeDuplicate {
		t.Fatalf("while scheduled: %s", s.Outcome)
	}
	c := h.ok(CancelCmd{ID: "a"}).Jobs[0]
	if c.Unique.Held {
		t.Fatal("a canceled job (canceled not chosen) still holds its key")
	}
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k", Unique: u})
	back := h.ok(RetryCmd{ID: "a"}).Jobs[0]
	if back.State != StatePending || back.Unique.Held {
		t.Fatalf("retried job %s holds its key again: %v", back.State, back.Unique.Held)
	}
	if s := h.submitOutcome(NewJob{ID: "c", Queue: "q", Kind: "k", Unique: u}); s.Outcome != OutcomeDuplicate || s.Job.ID != "b" {
		t.Fatalf("third submit: %s of %q, want duplicate of b", s.Outcome, s.Job.ID)
	}
	// Chosen terminal states keep the key; a sweep that removes the job
	// frees it.
	keep := &UniqueOpts{States: RequiredUniqueStates | StatesOf(StateCanceled)}
	h.submit(NewJob{ID: "d", Queue: "q", Kind: "k", Payload: []byte("d"), Unique: keep})
	h.ok(CancelCmd{ID: "d"})
	if s := h.submitOutcome(NewJob{ID: "e", Queue: "q", Kind: "k", Payload: []byte("d"), Unique: keep}); s.Outcome != OutcomeDuplicate {
		t.Fatalf("a job canceled with canceled chosen: %s", s.Outcome)
	}
	h.ok(SweepCmd{MaxPerQueue: 0, MaxAge: time.Nanosecond})
	h.now = h.now.Add(time.Second)
	h.ok(SweepCmd{MaxAge: time.Nanosecond})
	if _, ok := h.m.Get("d"); ok {
		t.Fatal("sweep kept d")
	}
	h.submit(NewJob{ID: "e", Queue: "q", Kind: "k", Payload: []byte("d"), Unique: keep})
}

// With a period, a key is one per window of log time.
func TestUniquePeriodWindows(t *testing.T) {
	h := newHarness(t)
	h.now = time.Unix(1000, 0).UTC() // windows of 10 s start at multiples of 10 s
	u := &UniqueOpts{Period: 10 * time.Second}
	j := h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Unique: u})
	if !j.Unique.Window.Equal(time.Unix(1000, 0)) {
		t.Fatalf("window %v", j.Unique.Window)
	}
	h.now = h.now.Add(9 * time.Second)
	if s := h.submitOutcome(NewJob{ID: "b", Queue: "q", Kind: "k", Unique: u}); s.Outcome != OutcomeDuplicate {
		t.Fatalf("same window: %s", s.Outcome)
	}
	h.now = h.now.Add(time.Second)
	if j := h.submit(NewJob{ID: "b", Queue: "q", Kind: "k", Unique: u}); !j.Unique.Window.Equal(time.Unix(1010, 0)) {
		t.Fatalf("next window %v", j.Unique.Window)
	}
}

// Bad unique options are refused: a period out of range, a state that
// does not exist.
func TestUniqueRefusals(t *testing.T) {
	h := newHarness(t)
	for _, u := range []UniqueOpts{{Period: -1}, {Period: MaxDelay + 1}, {States: 1}, {States: 1 | StatesOf(StatePending)}} {
		nj := NewJob{Queue: "q", Kind: "k", Unique: &u}
		if _, err := EncodeCommand(SubmitCmd{Jobs: []NewJob{nj}}); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("EncodeCommand with %+v: %v", u, err)
		}
		if s := h.submitOutcome(nj); s.Outcome != OutcomeRejected || !errors.Is(s.Err(), ErrInvalidCommand) {
			t.Errorf("apply with %+v: %s %v", u, s.Outcome, s.Err())
		}
	}
	if h.m.Len() != 0 {
		t.Fatal("a refused unique job was created")
	}
}

// Unique keys survive a snapshot (held and freed alike, each job's key in
// its record); a snapshot in which two jobs hold one key is corrupt, as is
// a version 5 one with a unique job.
func TestUniqueSnapshot(t *testing.T) {
	h := newHarness(t)
	u := &UniqueOpts{}
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Unique: u})
	h.ok(CancelCmd{ID: "a"})
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k", Unique: u})
	persist := func() []byte {
		snap, _ := h.m.Snapshot()
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	r := New()
	if err := r.Restore(bytes.NewReader(persist())); err != nil || r.Digest() != h.m.Digest() {
		t.Fatalf("restore: %v", err)
	}
	idx := r.Apply(Entry{Index: h.index + 1, Term: 1, Time: h.now, Cmd: appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{ID: "c", Queue: "q", Kind: "k", Unique: u}}})})
	if res, _ := DecodeResult(idx); res.Submitted[0].Outcome != OutcomeDuplicate || res.Submitted[0].Job.ID != "b" {
		t.Fatalf("after restore: %+v", res.Submitted)
	}
	if err := New().Restore(bytes.NewReader(setSnapVersion(h.m, persist(), 5))); !IsCorrupt(err) {
		t.Fatalf("version 5 with unique jobs: %v", err)
	}
	// Make a hold its key again in the live state: two holders.
	h.m.mu.Lock()
	a := h.m.st.get("a")
	c := *a.uniq()
	c.held, c.states = true, allStates
	a.out = &outcome{lastErr: a.lastErr(), uq: &c}
	sl := h.m.st.slots[a.h]
	h.m.st.accSub(sl)
	sl.sum = h.m.st.hash(a)
	h.m.st.accAdd(sl)
	h.m.mu.Unlock()
	if err := New().Restore(bytes.NewReader(persist())); !IsCorrupt(err) || !strings.Contains(err.Error(), "unique key held by another job") {
		t.Fatalf("two holders of one key: %v", err)
	}
}

// A job waiting for its parents holds its key (the states before a job
// finishes are always chosen); canceled by its parent's failure, it frees
// it.
func TestUniqueWaitingHoldsKey(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "p", Queue: "q", Kind: "k"})
	u := &UniqueOpts{States: StatesOf(StateSucceeded)}
	w := h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Payload: []byte("x"), After: []string{"p"}, Unique: u})
	if w.State != StateWaiting || !w.Unique.Held || !w.Unique.States.Has(StateWaiting) {
		t.Fatalf("waiting job %s, key %+v", w.State, w.Unique)
	}
	if s := h.submitOutcome(NewJob{ID: "b", Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u}); s.Outcome != OutcomeDuplicate || s.Job.ID != "a" {
		t.Fatalf("submit while a waits: %s %q", s.Outcome, s.Job.ID)
	}
	h.ok(CancelCmd{ID: "p"}) // a is canceled by its policy: its key frees
	if j, _ := h.m.Get("a"); j.State != StateCanceled || j.Unique.Held {
		t.Fatalf("a after its parent's cancel: %s, holds its key %v", j.State, j.Unique.Held)
	}
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k", Payload: []byte("x"), Unique: u})
}
