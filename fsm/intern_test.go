package fsm

import (
	"testing"
	"time"
)

// Looking up a known backoff policy allocates nothing (every submitted
// job's policy is looked up twice on every member).
func TestBackoffLookupDoesNotAllocate(t *testing.T) {
	s := newState()
	b := Backoff{Base: time.Second, Max: time.Minute, Factor: 2000, Jitter: 1}
	p := s.backoff(b)
	if *p != b || s.backoff(b) != p {
		t.Fatalf("interned %+v (%p), again %p", *p, p, s.backoff(b))
	}
	if allocs := testing.AllocsPerRun(100, func() { s.backoff(b) }); allocs != 0 {
		t.Fatalf("%.0f allocations per lookup of a known policy, want 0", allocs)
	}
}
