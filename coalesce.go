package jobraft

import (
	"sync"
	"sync/atomic"
	"time"
)

// coalescer coalesces concurrent requests into shared raft entries: up to
// inflight() entries are in flight at once, and requests that arrive
// meanwhile form the next ones. It is the one mechanism behind submits
// (batcher.go) and lease commands (opbatch.go); each supplies what a
// request is (T), what its caller is answered (O), how many queued requests
// the next entry takes, and how an entry is proposed and answered. The
// coalescers of one member share a hold (holdGate).
type coalescer[T, O any] struct {
	inflightMax func() int
	// take returns how many requests from the head of queue (at least one)
	// form the next entry.
	take func(queue []*pending[T, O]) int
	// send proposes batch as one entry and answers each request on its
	// done channel.
	send func(batch []*pending[T, O])
	// closedOutcome answers the requests still queued at close.
	closedOutcome O

	gate     *holdGate // its mu guards everything below
	queue    []*pending[T, O]
	inflight int
	closed   bool

	entries atomic.Uint64 // entries proposed
	items   atomic.Uint64 // requests in them

	free sync.Pool // recycled *pending[T, O] (recycle)
}

// pending is one queued request. Whoever answers it on done must not touch
// it afterwards: its caller may recycle it at once.
type pending[T, O any] struct {
	req  T
	sent bool
	done chan O // buffered: the sender never blocks
}

// join makes b one of g's coalescers: b is guarded by g's lock and held by
// its holds. Called once, before b is used.
func (b *coalescer[T, O]) join(g *holdGate) {
	b.gate = g
	g.members = append(g.members, b)
}

func (b *coalescer[T, O]) enqueue(req T) (*pending[T, O], error) {
	p, _ := b.free.Get().(*pending[T, O])
	if p == nil {
		p = &pending[T, O]{done: make(chan O, 1)}
	}
	p.req = req
	g := b.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.queue = append(b.queue, p)
	g.arrivedLocked()
	b.dispatchLocked()
	return p, nil
}

// recycle gives p back for a later enqueue. Only its caller may, and only
// once p can be answered no more: after it received p's answer, or after
// withdraw removed it. (A request its caller gave up on after it was sent
// is answered later and left to the collector.) A request and its answer
// channel are two allocations, the answer's buffer the size of O.
func (b *coalescer[T, O]) recycle(p *pending[T, O]) {
	var zero T
	p.req, p.sent = zero, false
	b.free.Put(p)
}

// withdraw removes p if it was not sent yet; false means it was sent (its
// entry may commit).
func (b *coalescer[T, O]) withdraw(p *pending[T, O]) bool {
	b.gate.mu.Lock()
	defer b.gate.mu.Unlock()
	if p.sent {
		return false
	}
	for i, q := range b.queue {
		if q == p {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

func (b *coalescer[T, O]) queuedLocked() int { return len(b.queue) }

func (b *coalescer[T, O]) dispatchLocked() {
	for !b.gate.holding && b.inflight < b.inflightMax() && len(b.queue) > 0 {
		n := max(b.take(b.queue), 1)
		batch := make([]*pending[T, O], n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		for _, p := range batch {
			p.sent = true
		}
		b.inflight++
		go b.run(batch)
	}
}

func (b *coalescer[T, O]) run(batch []*pending[T, O]) {
	b.entries.Add(1)
	b.items.Add(uint64(len(batch)))
	b.send(batch)
	g := b.gate
	g.mu.Lock()
	b.inflight--
	if !b.closed {
		g.answeredLocked(len(batch))
	}
	b.dispatchLocked()
	g.mu.Unlock()
}

// close refuses new requests; queued ones are answered closedOutcome (they
// were never sent).
func (b *coalescer[T, O]) close() {
	g := b.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.done <- b.closedOutcome
	}
	b.queue = nil
}

// holdGate is the hold of a member's coalescers.
//
// When an entry of two or more requests is answered, its callers are
// likely to come straight back (a worker submits its next job, claims it,
// acks it; a closed loop of clients), and each would otherwise take the
// next free slot alone or in a small group: a stream of concurrent callers
// splits into several groups that commit in turn, and every group pays a
// whole replication round (an fsync on each member, two network hops) for
// its share of the callers. So the coalescers hold their next entries back
// until as many requests are queued, in all of them together, as were
// waiting plus those just answered, or for at most hold, whichever comes
// first (the hold; PostgreSQL's commit_delay with commit_siblings is the
// same idea). They share it because a caller answered by one often comes
// back to the other (a submit's caller claims next): released together,
// their entries reach raft together and share one replication round.
//
// A lone caller is never held: an entry of one request starts no hold. Nor
// are callers who do not come straight back (a worker that long-polls for
// work between two acks): after holdMisses holds in a row ended by the
// timer, the gate holds again only for one entry in holdProbe, until a
// hold fills.
type holdGate struct {
	hold time.Duration // 0: never hold

	mu      sync.Mutex
	members []holdMember
	holding bool        // dispatch waits for want requests or the timer
	want    int         // queued requests (all members) that end the hold
	gen     uint64      // which hold the timer ends
	timer   *time.Timer // ends the current hold
	misses  int         // holds in a row the timer ended
	skipped int         // entries that started no hold since the last, misses reached

	holds   atomic.Uint64 // holds begun
	expired atomic.Uint64 // holds the timer ended (the callers did not all come back in time)
}

// holdMember is a coalescer as its gate sees it. mu held.
type holdMember interface {
	queuedLocked() int
	dispatchLocked()
}

// holdMisses holds in a row that the timer ended stop the gate from
// holding but for one entry in holdProbe.
const (
	holdMisses = 3
	holdProbe  = 16
)

func newHoldGate(hold time.Duration) *holdGate { return &holdGate{hold: hold} }

func (g *holdGate) queuedLocked() int {
	n := 0
	for _, m := range g.members {
		n += m.queuedLocked()
	}
	return n
}

// answeredLocked notes that an entry of n requests was answered: it starts
// a hold (n ≥ 2), or makes the current one wait for these callers too.
func (g *holdGate) answeredLocked(n int) {
	if !g.holding {
		if n < 2 || g.hold <= 0 {
			return
		}
		if g.misses >= holdMisses {
			if g.skipped++; g.skipped < holdProbe {
				return
			}
			g.skipped = 0
		}
		g.holding, g.want = true, g.queuedLocked()
		g.gen++
		gen := g.gen
		g.holds.Add(1)
		g.timer = time.AfterFunc(g.hold, func() { g.expire(gen) })
	}
	g.want += n
	g.arrivedLocked()
}

// arrivedLocked ends the hold, as the callers it waited for came back,
// once enough requests are queued. The caller dispatches its own
// coalescer; the others are dispatched here.
func (g *holdGate) arrivedLocked() {
	if !g.holding || g.queuedLocked() < g.want {
		return
	}
	g.holding = false
	g.timer.Stop()
	g.misses, g.skipped = 0, 0
	for _, m := range g.members {
		m.dispatchLocked()
	}
}

// expire ends hold gen when it still holds.
func (g *holdGate) expire(gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding || g.gen != gen {
		return
	}
	g.expired.Add(1)
	g.holding = false
	g.misses++
	for _, m := range g.members {
		m.dispatchLocked()
	}
}
