package fsm

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// scribble overwrites every byte and element a caller could write in j.
func scribble(j *Job) {
	for i := range j.Payload {
		j.Payload[i] = 'X'
	}
	for i := range j.Result {
		j.Result[i] = 'X'
	}
	for i := range j.After {
		j.After[i] = "scribbled"
	}
	for i := range j.Unmet {
		j.Unmet[i] = "scribbled"
	}
}

// What Get, List, Schedule and Schedules answer is the caller's: writing
// into its payload, result, parents or a schedule's template, zone shifts
// and open jobs changes nothing in the state machine — not a later
// answer, not a snapshot's bytes (a restore of it has the digest of the
// state before the writes).
func TestQueryAnswersAreTheCallersToWrite(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "done", Queue: "q", Kind: "k", Payload: []byte("payload-of-done")})
	j := h.claim1("q", time.Minute)
	h.ok(AckCmd{ID: j.ID, Token: j.Lease.Token, Result: []byte("result-of-done")})
	h.submit(NewJob{ID: "parent", Queue: "q", Kind: "k", Payload: []byte("payload-of-parent")})
	h.submit(NewJob{ID: "child", Queue: "q", Kind: "k", Payload: []byte("payload-of-child"), After: []string{"parent"}})
	h.ok(ScheduleCmd{Def: ScheduleDef{ID: "s", Every: time.Hour,
		Zone: Zone{Name: "Test/Shifting", Offset: 3600, Shifts: []ZoneShift{{At: 1, Offset: 7200}, {At: 2, Offset: 3600}}},
		Job:  Template{Queue: "sq", Kind: "tick", Payload: []byte("template-payload")}, Overlap: OverlapSkip}})
	h.at(time.Hour).fire() // the schedule's job is open under OverlapSkip

	// What each answer says now, in JSON: a deep copy the writes below
	// cannot reach.
	render := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := map[string]string{}
	for _, id := range []string{"done", "parent", "child"} {
		want[id] = render(h.get(id))
	}
	wantSched := render(h.sched("s"))
	if d, c, s := h.get("done"), h.get("child"), h.sched("s"); len(d.Result) == 0 || len(d.Payload) == 0 || len(c.After) == 0 ||
		len(c.Unmet) == 0 || len(s.Open) == 0 || len(s.Zone.Shifts) == 0 || len(s.Job.Payload) == 0 {
		t.Fatalf("the setup lacks a slice to write into: %+v %+v %+v", d, c, s)
	}
	snap := func() []byte {
		s, err := h.m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := s.Persist(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	before := snap()
	digest := h.m.Digest()

	// Write into every answer.
	for id := range want {
		g := h.get(id)
		scribble(&g)
		if hd, ok := h.m.Head(id); !ok || hd.Payload != nil || hd.ID != id {
			t.Fatalf("Head(%q) = %+v, %v; want the job without its payload", id, hd, ok)
		} else {
			scribble(&hd)
		}
	}
	for _, st := range []State{StatePending, StateWaiting, StateSucceeded} {
		page, err := h.m.List(ListQuery{Queue: "q", State: st})
		if err != nil {
			t.Fatal(err)
		}
		for i := range page.Jobs {
			scribble(&page.Jobs[i])
		}
	}
	scribbleSched := func(s *Schedule) {
		for i := range s.Job.Payload {
			s.Job.Payload[i] = 'X'
		}
		for i := range s.Zone.Shifts {
			s.Zone.Shifts[i].Offset = -1
		}
		for i := range s.Open {
			s.Open[i] = "scribbled"
		}
	}
	s := h.sched("s")
	scribbleSched(&s)
	all := h.m.Schedules()
	for i := range all {
		scribbleSched(&all[i])
	}

	for id, w := range want {
		if got := render(h.get(id)); got != w {
			t.Errorf("job %q after the caller wrote into an answer: %s, want %s", id, got, w)
		}
	}
	if got := render(h.sched("s")); got != wantSched {
		t.Errorf("schedule after the caller wrote into an answer: %s, want %s", got, wantSched)
	}
	after := snap()
	if !bytes.Equal(before, after) {
		t.Errorf("the snapshot's bytes changed (%d -> %d bytes) though only answers were written", len(before), len(after))
	}
	r := New()
	if err := r.Restore(bytes.NewReader(after)); err != nil {
		t.Fatal(err)
	}
	if r.Digest() != digest {
		t.Errorf("a restore of the snapshot has digest %x, the state had %x", r.Digest().Sum, digest.Sum)
	}
}
