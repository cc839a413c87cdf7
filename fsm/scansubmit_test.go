package fsm

import (
	"slices"
	"testing"
	"time"
)

// ScanSubmit names, undecoded, the queue and kind of exactly the jobs a
// submit created pending: not a duplicate, a rejected job, one scheduled
// later or one waiting for its parents; and it does not read other
// results or cut ones.
func TestScanSubmit(t *testing.T) {
	m := New()
	apply := applier(t, m)
	apply(&SubmitCmd{Jobs: []NewJob{{ID: "old", Queue: "q", Kind: "k"}}})
	type qk struct{ q, k string }
	scan := func(out []byte) ([]qk, bool) {
		var got []qk
		ok := ScanSubmit(out, func(q, k string) { got = append(got, qk{q, k}) })
		return got, ok
	}
	out := apply(&SubmitCmd{Jobs: []NewJob{
		{ID: "a", Queue: "q", Kind: "k"},
		{ID: "old", Queue: "q", Kind: "k"},                                   // duplicate
		{ID: "later", Queue: "q", Kind: "k", RunAt: baseTime.Add(time.Hour)}, // scheduled
		{ID: "b", Queue: "r", Kind: "x"},
		{ID: "@bad", Queue: "q", Kind: "k"}, // rejected: a reserved ID
		{ID: "c", Queue: "q", Kind: "y"},
	}})
	r, err := DecodeResult(out)
	if err != nil || r.Err() != nil {
		t.Fatalf("submit: %v %v", err, r.Err())
	}
	if r.Submitted[4].Outcome != OutcomeRejected {
		t.Fatalf("the reserved ID was %v, want rejected", r.Submitted[4].Outcome)
	}
	got, ok := scan(out)
	if want := []qk{{"q", "k"}, {"r", "x"}, {"q", "y"}}; !ok || !slices.Equal(got, want) {
		t.Fatalf("ScanSubmit = %v, %v; want %v, true", got, ok, want)
	}
	for cut := 3; cut < len(out); cut++ {
		if _, ok := scan(out[:cut]); ok {
			t.Fatalf("a result cut to %d of %d bytes was read", cut, len(out))
		}
	}
	deps := apply(&SubmitCmd{Jobs: []NewJob{{ID: "child", Queue: "q", Kind: "k", After: []string{"a"}}}})
	if got, ok := scan(deps); ok != (deps[0] == ResultVersion) || len(got) != 0 {
		t.Fatalf("a dependency submit's result (version %d): ScanSubmit = %v, %v; want nothing, read only at version %d", deps[0], got, ok, ResultVersion)
	}
	if _, ok := scan(apply(&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute})); ok {
		t.Fatal("a claim's result was read")
	}
}
