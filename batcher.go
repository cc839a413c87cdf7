package jobraft

import (
	"fmt"
	"sync/atomic"

	"github.com/jobraft/jobraft/fsm"
)

// batcher coalesces concurrent submits into shared raft entries (a
// coalescer). Each entry is bounded by BatchMaxJobs jobs and BatchMaxBytes
// encoded bytes. A request (one SubmitBatch chunk) is never split across
// entries, so it commits all together or not at all.
type batcher struct {
	coalescer[submitReq, outcome]
	jobs atomic.Uint64 // jobs in the entries proposed
}

// submitReq is one queued submit: its jobs and their encoded size.
type submitReq struct {
	jobs []fsm.NewJob
	size int
}

// outcome is one attempt's answer: the per-job results of the entry
// (aligned with the request's jobs), or the proposal's error.
type outcome struct {
	subs []fsm.Submitted
	err  error
}

func newBatcher(c *Controller) *batcher {
	b := &batcher{}
	b.coalescer = coalescer[submitReq, outcome]{
		inflightMax:   func() int { return c.cfg.BatchInflight },
		closedOutcome: outcome{err: ErrClosed},
		take: func(queue []*pending[submitReq, outcome]) int {
			n, jobs, size := 0, 0, 0
			for n < len(queue) {
				q := queue[n].req
				if n > 0 && (jobs+len(q.jobs) > c.cfg.BatchMaxJobs || size+q.size > c.cfg.BatchMaxBytes) {
					break
				}
				n, jobs, size = n+1, jobs+len(q.jobs), size+q.size
			}
			return n
		},
		send: func(batch []*pending[submitReq, outcome]) { b.send(c, batch) },
	}
	return b
}

func (b *batcher) send(c *Controller, batch []*pending[submitReq, outcome]) {
	count := 0
	for _, p := range batch {
		count += len(p.req.jobs)
	}
	all := make([]fsm.NewJob, 0, count)
	for _, p := range batch {
		all = append(all, p.req.jobs...)
	}
	b.jobs.Add(uint64(count))
	subs, err := proposeSubmit(c, all)
	off := 0
	for _, p := range batch {
		if err != nil {
			p.done <- outcome{err: err}
			continue
		}
		n := len(p.req.jobs) // read before the answer: p may be recycled after it
		p.done <- outcome{subs: subs[off : off+n]}
		off += n
	}
}

func proposeSubmit(c *Controller, jobs []fsm.NewJob) ([]fsm.Submitted, error) {
	r, err := c.propose(c.life, &fsm.SubmitCmd{Jobs: jobs})
	if err != nil {
		return nil, err
	}
	if len(r.Submitted) != len(jobs) {
		return nil, fmt.Errorf("jobraft: submit entry %d answered %d jobs of %d", r.Index, len(r.Submitted), len(jobs))
	}
	return r.Submitted, nil
}
