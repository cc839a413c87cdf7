package jobraft

import (
	"sync"
	"sync/atomic"
)

// coalescer coalesces concurrent requests into shared raft entries: up to
// inflight() entries are in flight at once, and requests that arrive
// meanwhile form the next ones. It is the one mechanism behind submits
// (batcher.go) and lease commands (opbatch.go); each supplies what a
// request is (T), what its caller is answered (O), how many queued requests
// the next entry takes, and how an entry is proposed and answered.
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

	mu       sync.Mutex
	queue    []*pending[T, O]
	inflight int
	closed   bool

	entries atomic.Uint64 // entries proposed
	items   atomic.Uint64 // requests in them
}

// pending is one queued request.
type pending[T, O any] struct {
	req  T
	sent bool
	done chan O // buffered: the sender never blocks
}

func (b *coalescer[T, O]) enqueue(req T) (*pending[T, O], error) {
	p := &pending[T, O]{req: req, done: make(chan O, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.queue = append(b.queue, p)
	b.dispatchLocked()
	return p, nil
}

// withdraw removes p if it was not sent yet; false means it was sent (its
// entry may commit).
func (b *coalescer[T, O]) withdraw(p *pending[T, O]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
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

func (b *coalescer[T, O]) dispatchLocked() {
	for b.inflight < b.inflightMax() && len(b.queue) > 0 {
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
	b.mu.Lock()
	b.inflight--
	b.dispatchLocked()
	b.mu.Unlock()
}

// close refuses new requests; queued ones are answered closedOutcome (they
// were never sent).
func (b *coalescer[T, O]) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.done <- b.closedOutcome
	}
	b.queue = nil
}
