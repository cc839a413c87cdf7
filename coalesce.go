package jobraft

import (
	"sync"
	"sync/atomic"
	"time"
)

// coalescer coalesces concurrent requests into shared raft entries: up to
// inflight() entries are in flight at once, and requests that arrive
// meanwhile form the next ones.
//
// When an entry of two or more requests is answered, its callers are
// likely to come straight back (a worker submits its next job, a closed
// loop of clients), and each would otherwise take the next free slot
// alone or in a small group: a stream of concurrent callers splits into
// several groups that commit in turn, and every group pays a whole
// replication round (an fsync on each member, two network hops) for its
// share of the callers. So the coalescer holds the next entry back until
// as many requests are queued as were waiting plus those just answered,
// or for at most hold(), whichever comes first (the hold; PostgreSQL's
// commit_delay with commit_siblings is the same idea). A lone caller is
// never held: an entry of one request starts no hold. Nor are callers who
// do not come straight back (they answer a claim between two submits, say):
// after holdMisses holds in a row ended by the timer, the coalescer holds
// again only for one entry in holdProbe, until a hold fills. It is the one mechanism behind submits
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
	// hold is the longest the next entry waits for the callers of an
	// answered one to come back (0: never).
	hold func() time.Duration

	mu       sync.Mutex
	queue    []*pending[T, O]
	inflight int
	closed   bool
	holding  bool        // dispatch waits for want requests or the timer
	want     int         // queued requests that end the hold
	holdGen  uint64      // which hold the timer ends
	timer    *time.Timer // ends the current hold
	misses   int         // holds in a row the timer ended
	skipped  int         // entries that started no hold since the last, misses reached

	entries atomic.Uint64 // entries proposed
	items   atomic.Uint64 // requests in them
	holds   atomic.Uint64 // holds begun
	expired atomic.Uint64 // holds the timer ended (the callers did not all come back in time)
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
	if b.holding && len(b.queue) >= b.want {
		b.filledLocked()
	}
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
	for !b.holding && b.inflight < b.inflightMax() && len(b.queue) > 0 {
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
	b.answeredLocked(len(batch))
	b.dispatchLocked()
	b.mu.Unlock()
}

// answeredLocked notes that an entry of n requests was answered: it starts
// a hold (n ≥ 2), or makes the current one wait for these callers too.
func (b *coalescer[T, O]) answeredLocked(n int) {
	if b.closed {
		return
	}
	if !b.holding {
		d := time.Duration(0)
		if b.hold != nil {
			d = b.hold()
		}
		if n < 2 || d <= 0 {
			return
		}
		if b.misses >= holdMisses {
			if b.skipped++; b.skipped < holdProbe {
				return
			}
			b.skipped = 0
		}
		b.holding, b.want = true, len(b.queue)
		b.holdGen++
		gen := b.holdGen
		b.holds.Add(1)
		b.timer = time.AfterFunc(d, func() { b.expire(gen) })
	}
	b.want += n
	if len(b.queue) >= b.want {
		b.filledLocked()
	}
}

// holdMisses holds in a row that the timer ended stop the coalescer from
// holding but for one entry in holdProbe.
const (
	holdMisses = 3
	holdProbe  = 16
)

// expire ends hold gen when it still holds.
func (b *coalescer[T, O]) expire(gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.holding || b.holdGen != gen {
		return
	}
	b.expired.Add(1)
	b.holding = false
	b.misses++
	b.dispatchLocked()
}

// filledLocked ends the current hold, as the callers it waited for came
// back.
func (b *coalescer[T, O]) filledLocked() {
	b.holding = false
	b.timer.Stop()
	b.misses, b.skipped = 0, 0
}

// close refuses new requests; queued ones are answered closedOutcome (they
// were never sent).
func (b *coalescer[T, O]) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.holding {
		b.holding = false
		b.timer.Stop()
	}
	for _, p := range b.queue {
		p.done <- b.closedOutcome
	}
	b.queue = nil
}
