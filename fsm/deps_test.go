package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkDepIndexes asserts the index of dependents is the function of the
// records it claims to be: every held job naming a parent is listed under
// it, and nothing else is.
func checkDepIndexes(t fataler, st *state) {
	want := map[string][]string{}
	st.jobs.Scan(func(e idEnt) bool {
		sl := e.sl
		if d := sl.j.dep(); d != nil {
			for _, p := range d.after {
				want[p] = append(want[p], sl.j.id)
			}
		}
		return true
	})
	if len(want) != len(st.dep.kids) {
		t.Fatalf("dependents index holds %d parents, the records name %d", len(st.dep.kids), len(want))
	}
	for p, ids := range want {
		if got := slices.Sorted(slices.Values(st.dep.kids[p])); !slices.Equal(got, ids) {
			t.Fatalf("dependents of %q: index %q, records %q", p, got, ids)
		}
	}
}

// ackJob claims job id (alone in its queue's ready order) and acks it.
func (h *harness) ackJob(queue, id string) Result {
	h.t.Helper()
	j := h.claim1(queue, time.Minute)
	if j.ID != id {
		h.t.Fatalf("claimed %q, want %q", j.ID, id)
	}
	return h.ok(AckCmd{ID: id, Token: j.Lease.Token})
}

func (h *harness) get(id string) Job {
	h.t.Helper()
	j, ok := h.m.Get(id)
	if !ok {
		h.t.Fatalf("job %q not held", id)
	}
	return j
}

func TestDependentWaitsForEveryParent(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "p", Kind: "k"})
	h.submit(NewJob{ID: "b", Queue: "p", Kind: "k"})
	c := h.submit(NewJob{ID: "c", Queue: "q", Kind: "k", After: []string{"a", "b"}})
	if c.State != StateWaiting || !slices.Equal(c.Unmet, []string{"a", "b"}) {
		t.Fatalf("c: %s unmet %q, want waiting for a and b", c.State, c.Unmet)
	}
	if r := h.ok(ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 5, TTL: time.Minute}); len(r.Jobs) != 0 {
		t.Fatalf("claimed %d jobs of a queue holding only a waiting one", len(r.Jobs))
	}
	if q, _ := h.m.Queue("q"); q.Counts.Waiting != 1 || h.m.Claimable([]string{"q"}, nil, h.now) {
		t.Fatalf("queue q: %+v, claimable %v", q.Counts, h.m.Claimable([]string{"q"}, nil, h.now))
	}
	if r := h.ackJob("p", "a"); len(r.Cascade) != 0 {
		t.Fatalf("the first parent's ack moved %+v", r.Cascade)
	}
	if c := h.get("c"); c.State != StateWaiting || !slices.Equal(c.Unmet, []string{"b"}) {
		t.Fatalf("c after a: %s unmet %q", c.State, c.Unmet)
	}
	r := h.ackJob("p", "b")
	if len(r.Cascade) != 1 || r.Cascade[0].Kind != CascadeReleased || r.Cascade[0].Job.ID != "c" || r.Cascade[0].Job.State != StatePending {
		t.Fatalf("the last parent's ack: cascade %+v, want c released", r.Cascade)
	}
	if j := h.claim1("q", time.Minute); j.ID != "c" {
		t.Fatalf("claimed %q", j.ID)
	}
	if got := h.m.Dependents("a"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("Dependents(a) = %q", got)
	}
}

func TestSubmitRefusesBadParents(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "done", Queue: "p", Kind: "k"})
	h.ackJob("p", "done")
	h.submit(NewJob{ID: "gone", Queue: "p", Kind: "k"})
	h.ok(CancelCmd{ID: "gone"})
	h.submit(NewJob{ID: "run", Queue: "p", Kind: "k"})
	many := make([]string, MaxParents+1)
	for i := range many {
		many[i] = "p" + strings.Repeat("x", i)
	}
	r := h.ok(SubmitCmd{Jobs: []NewJob{
		{ID: "u", Queue: "q", Kind: "k", After: []string{"nope"}},
		{ID: "self", Queue: "q", Kind: "k", After: []string{"self"}},
		{ID: "x", Queue: "q", Kind: "k", After: []string{"y"}},
		{ID: "y", Queue: "q", Kind: "k", After: []string{"x"}},
		{ID: "z", Queue: "q", Kind: "k", After: []string{"x"}},
		{ID: "many", Queue: "q", Kind: "k", After: many},
		{ID: "failed", Queue: "q", Kind: "k", After: []string{"run", "gone"}},
		{ID: "twice", Queue: "q", Kind: "k", After: []string{"run", "run"}},
		{ID: "met", Queue: "q", Kind: "k", After: []string{"done"}},
		{ID: "fwd", Queue: "q", Kind: "k", After: []string{"later"}},
		{ID: "later", Queue: "q", Kind: "k", After: []string{"run"}},
	}})
	want := []error{ErrUnknownParent, ErrDependencyCycle, ErrDependencyCycle, ErrDependencyCycle, ErrDependencyCycle,
		ErrTooLarge, ErrParentFailed, ErrInvalidCommand, nil, nil, nil}
	for i, s := range r.Submitted {
		if !errors.Is(s.Err(), want[i]) || (want[i] == nil) != (s.Outcome == OutcomeCreated) {
			t.Errorf("job %d: %s %v, want %v", i, s.Outcome, s.Err(), want[i])
		}
	}
	if j := h.get("met"); j.State != StatePending || j.Unmet != nil {
		t.Errorf("a job whose parent succeeded: %s unmet %q, want pending", j.State, j.Unmet)
	}
	// A job naming a later job of its submit is created after it (its
	// submit sequence follows), waiting on it.
	if fwd, later := h.get("fwd"), h.get("later"); fwd.State != StateWaiting || fwd.Seq <= later.Seq {
		t.Errorf("fwd %s seq %d, later seq %d", fwd.State, fwd.Seq, later.Seq)
	}
	for _, c := range []Command{
		SubmitCmd{Jobs: []NewJob{{ID: "self", Queue: "q", Kind: "k", After: []string{"self"}}}},
		SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k", After: many}}},
		SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k", After: []string{"a"}, OnParentFailure: 9}}},
		SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k"}}, Batch: &BatchSpec{}},
		SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k"}}, Batch: &BatchSpec{ID: "b", Completion: &NewJob{Queue: "q", Kind: "k", After: []string{"m"}}}},
	} {
		if _, err := EncodeCommand(c); err == nil {
			t.Errorf("EncodeCommand(%+v) accepted", c)
		}
	}
}

func TestParentFailureCascades(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "p", Kind: "k"})
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k", After: []string{"a"}})
	h.submit(NewJob{ID: "c", Queue: "q", Kind: "k", After: []string{"b"}, OnParentFailure: ParentFailDead})
	h.submit(NewJob{ID: "d", Queue: "q", Kind: "k", After: []string{"a", "c"}})
	j := h.claim1("p", time.Minute)
	r := h.ok(TermCmd{ID: "a", Token: j.Lease.Token, Reason: "bad"})
	var got []string
	for _, c := range r.Cascade {
		got = append(got, c.Job.ID+":"+c.Job.State.String())
		if c.Kind != CascadeFailed {
			t.Errorf("cascade %+v", c)
		}
	}
	// Breadth first from a: its dependents b and d in ID order, then b's.
	if want := []string{"b:canceled", "d:canceled", "c:dead"}; !slices.Equal(got, want) {
		t.Fatalf("cascade %q, want %q", got, want)
	}
	if b := h.get("b"); b.LastError != `parent "a" ended dead` || !b.Updated.Equal(h.now) {
		t.Fatalf("b: %q at %v", b.LastError, b.Updated)
	}
}

// A parent's success is remembered by its dependent: a sweep removing
// the parent while the dependent waits for another strands nothing, and a
// waiting job's unmet parents are never swept.
func TestSweepDoesNotStrandADependent(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "p", Kind: "k"})
	h.submit(NewJob{ID: "b", Queue: "p", Kind: "k"})
	h.submit(NewJob{ID: "c", Queue: "q", Kind: "k", After: []string{"a", "b"}})
	h.ackJob("p", "a")
	h.now = h.now.Add(time.Hour)
	if r := h.ok(SweepCmd{MaxAge: time.Minute}); r.Removed != 1 {
		t.Fatalf("sweep removed %d, want a", r.Removed)
	}
	h.ackJob("p", "b")
	if c := h.get("c"); c.State != StatePending {
		t.Fatalf("c %s after its last parent succeeded, a swept", c.State)
	}
	checkIndexes(t, h.m.st)
}

func TestCancelAndRetryOfADependent(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "p", Kind: "k"})
	h.submit(NewJob{ID: "c", Queue: "q", Kind: "k", After: []string{"a"}})
	h.ok(CancelCmd{ID: "c", Reason: "no"})
	if j := h.ok(RetryCmd{ID: "c"}).Jobs[0]; j.State != StateWaiting {
		t.Fatalf("retried c %s, want waiting (a runs)", j.State)
	}
	j := h.claim1("p", time.Minute)
	h.ok(TermCmd{ID: "a", Token: j.Lease.Token})
	if c := h.get("c"); c.State != StateCanceled {
		t.Fatalf("c %s after a died", c.State)
	}
	h.refused(RetryCmd{ID: "c"}, ErrParentFailed)
	h.ok(RetryCmd{ID: "a"})
	h.ok(RetryCmd{ID: "c"})
	h.ackJob("p", "a")
	if c := h.get("c"); c.State != StatePending {
		t.Fatalf("c %s after a succeeded", c.State)
	}
	// A dependent whose unmet parent is gone cannot be retried.
	h.submit(NewJob{ID: "x", Queue: "px", Kind: "k"})
	h.submit(NewJob{ID: "y", Queue: "qy", Kind: "k", After: []string{"x"}})
	h.ok(CancelCmd{ID: "x"}) // y is canceled with it
	h.now = h.now.Add(time.Second)
	h.submit(NewJob{ID: "z", Queue: "px", Kind: "k"})
	h.ok(CancelCmd{ID: "z"})
	h.ok(SweepCmd{MaxPerQueue: 1}) // px keeps z; x goes; qy keeps y
	if _, held := h.m.Get("x"); held {
		t.Fatal("x still held")
	}
	h.refused(RetryCmd{ID: "y"}, ErrUnknownParent)
}

func TestBatchCompletesOnce(t *testing.T) {
	h := newHarness(t)
	spec := &BatchSpec{ID: "b", Completion: &NewJob{Queue: "after", Kind: "report", Payload: []byte("p")}}
	sub := SubmitCmd{Jobs: []NewJob{{ID: "m1", Queue: "q", Kind: "k"}, {ID: "m2", Queue: "q", Kind: "k", MaxAttempts: 1}}, Batch: spec}
	r := h.ok(sub)
	b, ok := h.m.Batch("b")
	if !ok || b.Members != 2 || b.Counts.Pending != 2 || b.Done || b.CompletionJob == "" || b.Sum != sub.Sum() {
		t.Fatalf("batch %+v", b)
	}
	if h.get("m1").Batch != "b" || r.Submitted[0].Job.Batch != "b" {
		t.Fatal("member without its batch")
	}
	if r := h.ackJob("q", "m1"); len(r.Completed) != 0 {
		t.Fatal("completed with a member open")
	}
	j := h.claim1("q", time.Minute)
	r = h.ok(NakCmd{ID: j.ID, Token: j.Lease.Token, Error: "x"}) // out of attempts: dead
	if len(r.Completed) != 1 || r.Completed[0].Counts.Succeeded != 1 || r.Completed[0].Failed() != 1 || !r.Completed[0].Done {
		t.Fatalf("completed %+v", r.Completed)
	}
	if len(r.Cascade) != 1 || r.Cascade[0].Kind != CascadeCompletion || r.Cascade[0].Job.ID != b.CompletionJob || r.Cascade[0].Job.Queue != "after" {
		t.Fatalf("cascade %+v", r.Cascade)
	}
	// A member retried and ended again moves the counts, not the
	// completion.
	h.ok(RetryCmd{ID: "m2"})
	if b, _ := h.m.Batch("b"); !b.Done || b.Counts.Pending != 1 {
		t.Fatalf("after retry: %+v", b)
	}
	h.ok(CancelCmd{ID: "m2"})
	if n := h.m.Len(); n != 3 {
		t.Fatalf("%d jobs held, want the 2 members and one completion job", n)
	}
	// The batch's ID is taken: its submit again is refused whole.
	r = h.refused(sub, ErrBatchExists)
	if !strings.Contains(r.Detail, "this same request") {
		t.Fatalf("detail %q", r.Detail)
	}
	sub.Jobs[0].Kind = "other"
	if r = h.refused(sub, ErrBatchExists); !strings.Contains(r.Detail, "another request") {
		t.Fatalf("detail %q", r.Detail)
	}
	// A batch whose every job is refused completes at once.
	r = h.ok(SubmitCmd{Jobs: []NewJob{{ID: "u", Queue: "q", Kind: "k", After: []string{"nope"}}}, Batch: &BatchSpec{ID: "empty"}})
	if len(r.Completed) != 1 || r.Completed[0].Members != 0 {
		t.Fatalf("empty batch: %+v", r.Completed)
	}
	// Retention: a sweep with MaxAge removes a batch completed that long ago.
	h.now = h.now.Add(time.Hour)
	h.ok(SweepCmd{MaxAge: time.Minute})
	if got := h.m.Batches("", 0); len(got) != 0 {
		t.Fatalf("batches after the sweep: %+v", got)
	}
}

// The digest covers batches: two states equal but for a batch's counts
// differ.
func TestDigestCoversBatches(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	for _, h := range []*harness{a, b} {
		h.ok(SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k"}}, Batch: &BatchSpec{ID: "b"}})
	}
	if a.m.Digest() != b.m.Digest() {
		t.Fatal("equal states, digests differ")
	}
	b.m.st.dep.groups.Scan(func(g *group) bool {
		c := *g
		c.counts[StatePending], c.counts[StateRunning] = 0, 1
		b.m.st.setGroup(g, &c)
		return false
	})
	if a.m.Digest() == b.m.Digest() {
		t.Fatal("a batch's counts changed, the digest did not")
	}
}
