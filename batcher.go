package jobraft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jobraft/jobraft/fsm"
)

// batcher coalesces concurrent submits into shared raft entries. Up to
// BatchInflight entries are in flight at once; requests that arrive while
// they are form the next entries, each bounded by BatchMaxJobs jobs and
// BatchMaxBytes encoded bytes. A request (one SubmitBatch chunk) is never
// split across entries, so it commits all together or not at all.
type batcher struct {
	c        *Controller
	mu       sync.Mutex
	queue    []*pendingSubmit
	inflight int
	closed   bool

	entries atomic.Uint64 // submit entries proposed
	jobs    atomic.Uint64 // jobs in them
}

type pendingSubmit struct {
	jobs []fsm.NewJob
	size int
	sent bool
	done chan outcome // buffered: the sender never blocks
}

// outcome is one attempt's answer: the per-job results of the entry
// (aligned with the request's jobs), or the proposal's error.
type outcome struct {
	subs []fsm.Submitted
	err  error
}

func newBatcher(c *Controller) *batcher { return &batcher{c: c} }

func (b *batcher) enqueue(jobs []fsm.NewJob, size int) (*pendingSubmit, error) {
	p := &pendingSubmit{jobs: jobs, size: size, done: make(chan outcome, 1)}
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
func (b *batcher) withdraw(p *pendingSubmit) bool {
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

func (b *batcher) dispatchLocked() {
	for b.inflight < b.c.cfg.BatchInflight && len(b.queue) > 0 {
		n, jobs, size := 0, 0, 0
		for n < len(b.queue) {
			q := b.queue[n]
			if n > 0 && (jobs+len(q.jobs) > b.c.cfg.BatchMaxJobs || size+q.size > b.c.cfg.BatchMaxBytes) {
				break
			}
			n, jobs, size = n+1, jobs+len(q.jobs), size+q.size
		}
		batch := make([]*pendingSubmit, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		for _, p := range batch {
			p.sent = true
		}
		b.inflight++
		go b.send(batch, jobs)
	}
}

func (b *batcher) send(batch []*pendingSubmit, count int) {
	all := make([]fsm.NewJob, 0, count)
	for _, p := range batch {
		all = append(all, p.jobs...)
	}
	b.entries.Add(1)
	b.jobs.Add(uint64(count))
	subs, err := b.propose(all)
	off := 0
	for _, p := range batch {
		if err != nil {
			p.done <- outcome{err: err}
			continue
		}
		p.done <- outcome{subs: subs[off : off+len(p.jobs)]}
		off += len(p.jobs)
	}
	b.mu.Lock()
	b.inflight--
	b.dispatchLocked()
	b.mu.Unlock()
}

func (b *batcher) propose(jobs []fsm.NewJob) ([]fsm.Submitted, error) {
	r, err := b.c.propose(b.c.life, &fsm.SubmitCmd{Jobs: jobs})
	if err != nil {
		return nil, err
	}
	if len(r.Submitted) != len(jobs) {
		return nil, fmt.Errorf("jobraft: submit entry %d answered %d jobs of %d", r.Index, len(r.Submitted), len(jobs))
	}
	return r.Submitted, nil
}

// close refuses new requests; queued ones are answered ErrClosed (they were
// never sent).
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.done <- outcome{err: ErrClosed}
	}
	b.queue = nil
}
