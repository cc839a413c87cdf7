package coalesce

import (
	"fmt"
	"sync/atomic"

	"github.com/jobraft/jobraft/fsm"
)

// Limits bound a coalescer's entries.
type Limits struct {
	Inflight int // entries in flight at once
	MaxJobs  int // jobs of a submit entry
	MaxBytes int // encoded bytes of an entry (one request bigger travels alone)
}

// Submits coalesces concurrent submits into shared fsm.SubmitCmd entries.
// Each entry is bounded by Limits.MaxJobs jobs and Limits.MaxBytes encoded
// bytes. A request (one SubmitBatch chunk) is never split across entries,
// so it commits all together or not at all.
type Submits struct {
	*Coalescer[SubmitReq, SubmitOutcome]
	propose func(fsm.Command) (fsm.Result, error)
	jobs    atomic.Uint64 // jobs in the entries proposed
}

// SubmitReq is one queued submit: its jobs and their encoded size.
type SubmitReq struct {
	Jobs []fsm.NewJob
	Size int
}

// SubmitOutcome is one attempt's answer: the per-job results of the entry
// (aligned with the request's jobs), or the proposal's error.
type SubmitOutcome struct {
	Subs []fsm.Submitted
	Err  error
}

// NewSubmits returns g's submit coalescer: propose proposes one command
// and decodes its result (the proposal's error, or the refusal of the
// whole entry); a closed coalescer answers errClosed.
func NewSubmits(g *Gate, l Limits, propose func(fsm.Command) (fsm.Result, error), errClosed error) *Submits {
	s := &Submits{propose: propose}
	s.Coalescer = New(g, Policy[SubmitReq, SubmitOutcome]{
		Inflight:  l.Inflight,
		Closed:    SubmitOutcome{Err: errClosed},
		ErrClosed: errClosed,
		Take:      func(queue []*Pending[SubmitReq, SubmitOutcome]) int { return takeSubmits(queue, l) },
		Send:      s.send,
	})
	return s
}

// Jobs returns how many jobs the proposed entries carried.
func (s *Submits) Jobs() uint64 { return s.jobs.Load() }

// takeSubmits is how many requests from the head of queue the next entry
// takes: at least one, then as many as fit the limits.
func takeSubmits(queue []*Pending[SubmitReq, SubmitOutcome], l Limits) int {
	n, jobs, size := 0, 0, 0
	for n < len(queue) {
		q := queue[n].Req
		if n > 0 && (jobs+len(q.Jobs) > l.MaxJobs || size+q.Size > l.MaxBytes) {
			break
		}
		n, jobs, size = n+1, jobs+len(q.Jobs), size+q.Size
	}
	return n
}

func (s *Submits) send(batch []*Pending[SubmitReq, SubmitOutcome]) {
	count := 0
	for _, p := range batch {
		count += len(p.Req.Jobs)
	}
	all := make([]fsm.NewJob, 0, count)
	for _, p := range batch {
		all = append(all, p.Req.Jobs...)
	}
	s.jobs.Add(uint64(count))
	subs, err := s.proposeJobs(all)
	off := 0
	for _, p := range batch {
		if err != nil {
			p.Answer(SubmitOutcome{Err: err})
			continue
		}
		n := len(p.Req.Jobs) // read before the answer: p may be recycled after it
		p.Answer(SubmitOutcome{Subs: subs[off : off+n]})
		off += n
	}
}

func (s *Submits) proposeJobs(jobs []fsm.NewJob) ([]fsm.Submitted, error) {
	r, err := s.propose(&fsm.SubmitCmd{Jobs: jobs})
	if err != nil {
		return nil, err
	}
	if len(r.Submitted) != len(jobs) {
		return nil, fmt.Errorf("jobraft: submit entry %d answered %d jobs of %d", r.Index, len(r.Submitted), len(jobs))
	}
	return r.Submitted, nil
}
