package coalesce

import (
	"sync"
	"sync/atomic"
)

// Coalescer coalesces concurrent requests of type T into shared entries,
// answering each caller with an O: up to Policy.Inflight entries are in
// flight at once, and requests that arrive meanwhile form the next ones.
// Its Policy says how many queued requests the next entry takes and how
// an entry is proposed and answered. The coalescers of one member share a
// hold (Gate).
type Coalescer[T, O any] struct {
	p Policy[T, O]

	gate     *Gate // its mu guards everything below
	queue    []*Pending[T, O]
	inflight int
	closed   bool

	entries atomic.Uint64 // entries proposed
	items   atomic.Uint64 // requests in them

	free sync.Pool // recycled *Pending[T, O] (Recycle)
}

// Policy is what a coalescer's entries are.
type Policy[T, O any] struct {
	// Inflight is the most entries in flight at once (at least 1).
	Inflight int
	// Take returns how many requests from the head of queue (at least one)
	// form the next entry.
	Take func(queue []*Pending[T, O]) int
	// Send proposes batch as one entry and answers each request
	// (Pending.Answer).
	Send func(batch []*Pending[T, O])
	// Closed answers the requests still queued at Close.
	Closed O
	// ErrClosed is Enqueue's error after Close.
	ErrClosed error
}

// Pending is one queued request. Whoever answers it must not touch it
// afterwards: its caller may recycle it at once.
type Pending[T, O any] struct {
	Req  T
	sent bool
	done chan O // buffered: the sender never blocks
}

// Done delivers the request's answer.
func (p *Pending[T, O]) Done() <-chan O { return p.done }

// Answer answers the request (once); it never blocks.
func (p *Pending[T, O]) Answer(o O) { p.done <- o }

// New returns a coalescer with policy p, one of g's coalescers: guarded by
// g's lock and held by its holds.
func New[T, O any](g *Gate, p Policy[T, O]) *Coalescer[T, O] {
	b := &Coalescer[T, O]{p: p, gate: g}
	g.members = append(g.members, b)
	return b
}

// Entries returns how many entries were proposed; Items how many requests
// they carried.
func (b *Coalescer[T, O]) Entries() uint64 { return b.entries.Load() }

// Items returns how many requests the proposed entries carried.
func (b *Coalescer[T, O]) Items() uint64 { return b.items.Load() }

// Enqueue queues req; the answer comes on the returned request's Done.
func (b *Coalescer[T, O]) Enqueue(req T) (*Pending[T, O], error) {
	p, _ := b.free.Get().(*Pending[T, O])
	if p == nil {
		p = &Pending[T, O]{done: make(chan O, 1)}
	}
	p.Req = req
	g := b.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if b.closed {
		return nil, b.p.ErrClosed
	}
	b.queue = append(b.queue, p)
	g.arrivedLocked()
	b.dispatchLocked()
	return p, nil
}

// Recycle gives p back for a later Enqueue. Only its caller may, and only
// once p can be answered no more: after it received p's answer, or after
// Withdraw removed it. (A request its caller gave up on after it was sent
// is answered later and left to the collector.) A request and its answer
// channel are two allocations, the answer's buffer the size of O.
func (b *Coalescer[T, O]) Recycle(p *Pending[T, O]) {
	var zero T
	p.Req, p.sent = zero, false
	b.free.Put(p)
}

// Withdraw removes p if it was not sent yet; false means it was sent (its
// entry may commit).
func (b *Coalescer[T, O]) Withdraw(p *Pending[T, O]) bool {
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

func (b *Coalescer[T, O]) queuedLocked() int { return len(b.queue) }

func (b *Coalescer[T, O]) dispatchLocked() {
	for !b.gate.st.holding && b.inflight < b.p.Inflight && len(b.queue) > 0 {
		n := max(b.p.Take(b.queue), 1)
		batch := make([]*Pending[T, O], n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		for _, p := range batch {
			p.sent = true
		}
		b.inflight++
		go b.run(batch)
	}
}

func (b *Coalescer[T, O]) run(batch []*Pending[T, O]) {
	b.entries.Add(1)
	b.items.Add(uint64(len(batch)))
	b.p.Send(batch)
	g := b.gate
	g.mu.Lock()
	b.inflight--
	if !b.closed {
		g.answeredLocked(len(batch))
	}
	b.dispatchLocked()
	g.mu.Unlock()
}

// Close refuses new requests; queued ones are answered Policy.Closed
// (they were never sent).
func (b *Coalescer[T, O]) Close() {
	g := b.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.done <- b.p.Closed
	}
	b.queue = nil
}
