package fsm

import (
	"testing"
	"time"
)

// Looking up a known class allocates nothing (every submitted job's class
// is looked up on every member, but for a submit's jobs sharing one).
func TestClassLookupDoesNotAllocate(t *testing.T) {
	s := newState()
	q := s.queueOrCreate("q")
	k := keyOf("kind", Backoff{Base: time.Second, Max: time.Minute, Factor: 2000, Jitter: 1}, 0)
	c := s.class(q, k)
	if c.classKey != k || c.queue != "q" || c.q != q || c.maxAtt != DefaultMaxAttempts || s.class(q, k) != c {
		t.Fatalf("interned %+v (%p), again %p", *c, c, s.class(q, k))
	}
	if allocs := testing.AllocsPerRun(100, func() { s.class(q, k) }); allocs != 0 {
		t.Fatalf("%.0f allocations per lookup of a known class, want 0", allocs)
	}
}

// testClass is a class of its own (as a decoded record's) for records
// built by tests.
func testClass(queue, kind string, bo Backoff, maxAtt uint32) *class {
	return &class{queue: queue, classKey: keyOf(kind, bo, maxAtt)}
}
