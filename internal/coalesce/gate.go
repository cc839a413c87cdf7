package coalesce

import (
	"sync"
	"sync/atomic"
	"time"
)

// Gate is the hold of a member's coalescers (hold.go has the policy): the
// shell around decide that owns their lock, the hold's timer and the
// members it dispatches when a hold ends.
type Gate struct {
	hold time.Duration // 0: never hold

	mu      sync.Mutex
	members []member
	st      holdState
	gen     uint64      // which hold the timer ends
	timer   *time.Timer // ends the current hold

	holds   atomic.Uint64 // holds begun
	expired atomic.Uint64 // holds the timer ended (the callers did not all come back in time)
}

// member is a coalescer as its gate sees it. mu held.
type member interface {
	queuedLocked() int
	dispatchLocked()
}

// NewGate returns a gate that holds for at most hold (0 or less: never).
func NewGate(hold time.Duration) *Gate {
	return &Gate{hold: hold, st: holdState{never: hold <= 0}}
}

// Holds returns how many holds began; Expired how many of them the timer
// ended.
func (g *Gate) Holds() uint64 { return g.holds.Load() }

// Expired returns how many holds the timer ended.
func (g *Gate) Expired() uint64 { return g.expired.Load() }

func (g *Gate) queuedLocked() int {
	n := 0
	for _, m := range g.members {
		n += m.queuedLocked()
	}
	return n
}

// answeredLocked notes that an entry of n requests was answered. The
// caller dispatches its own coalescer.
func (g *Gate) answeredLocked(n int) {
	g.stepLocked(step{kind: answered, n: n, queued: g.queuedLocked()})
}

// arrivedLocked notes that a request was queued. The caller dispatches its
// own coalescer.
func (g *Gate) arrivedLocked() { g.stepLocked(step{kind: arrived, queued: g.queuedLocked()}) }

// expire ends hold gen when it still holds.
func (g *Gate) expire(gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen == gen {
		g.stepLocked(step{kind: timedOut})
	}
}

func (g *Gate) stepLocked(e step) {
	var v verdict
	g.st, v = decide(g.st, e)
	switch v {
	case begin:
		g.gen++
		gen := g.gen
		g.holds.Add(1)
		g.timer = time.AfterFunc(g.hold, func() { g.expire(gen) })
		return
	case release:
		g.timer.Stop()
	case expire:
		g.expired.Add(1)
	default:
		return
	}
	for _, m := range g.members {
		m.dispatchLocked()
	}
}
