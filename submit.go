package jobraft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/coalesce"
	"github.com/jobraft/jobraft/raft"
)

// SubmitRequest is one job to submit.
type SubmitRequest struct {
	// ID names the job. Empty: the controller assigns a unique,
	// time-ordered ID. The ID is the job's idempotency key: a submit whose
	// ID exists returns the existing job and creates nothing. IDs are UTF-8
	// text without control characters, at most fsm.MaxIDLen bytes, and
	// must not start with '@'.
	ID    string
	Queue string
	Kind  string
	// Payload is opaque, at most Config.MaxPayload bytes.
	Payload []byte
	// Priority: larger values are claimed first.
	Priority int32
	// RunAt delays the job until then, on the leader's clock; Delay, if
	// set instead (not both), is relative to this member's clock at
	// submit, in [0, fsm.MaxDelay].
	RunAt time.Time
	Delay time.Duration
	// MaxAttempts and Backoff override Config.MaxAttempts/Backoff.
	MaxAttempts uint32
	Backoff     fsm.Backoff
	// IdempotencyKey, if set, is a second key (global, not per queue): a
	// later submit with the same key, whatever its ID, returns the keyed
	// job and creates nothing, as long as that job is retained.
	IdempotencyKey string
	// After names the job's parents (at most fsm.MaxParents, held jobs or
	// jobs of the same call): the job waits (StateWaiting) until every
	// one succeeded, and is canceled (or dead: OnParentFailure) in the
	// entry where one ends otherwise. An unknown parent, a failed one or
	// a cycle rejects the job (ErrNotSubmitted, matching
	// fsm.ErrUnknownParent, fsm.ErrParentFailed, fsm.ErrDependencyCycle).
	// See docs/dependencies.md.
	After           []string
	OnParentFailure ParentPolicy
	// Unique, if set, makes the job unique by (queue, kind, payload)
	// within Unique.Period of log time and while the job's state is among
	// Unique.States: a submit whose key a job holds returns that job as
	// a duplicate and creates nothing (limits.go, fsm.UniqueOpts).
	Unique *UniqueOpts
}

// Submitted is the job Submit returns: the job as created, or the existing
// one (without payload), and whether it existed before the call. Job is
// embedded: s.ID, s.State, ... read the job's fields.
type Submitted struct {
	Job
	// Duplicate: as SubmitResult.Duplicate.
	Duplicate bool
}

// SubmitResult is the outcome of one job of SubmitBatch.
type SubmitResult struct {
	// Job is the job as created (or the existing one), without payload.
	Job Job
	// Duplicate: the ID, idempotency key or unique key named a job that
	// existed before this call, and Job is that job. (A job this call itself created on
	// an attempt whose answer was lost is not a duplicate; after such an
	// attempt a job found under this call's own ID is reported new, one
	// found by the idempotency key under another ID a duplicate.)
	Duplicate bool
	// Err is nil on success, else a *SubmitError matching ErrNotSubmitted
	// or ErrMayExist.
	Err error
}

// Submit submits one job on any member and returns it once it is
// committed (durable on a quorum), without its payload, with Duplicate set
// when its ID or idempotency key named a job that existed before the call.
// Wait returns the job once it finished.
//
// Guarantees:
//   - nil error: the job exists exactly once (created by this call, or
//     the existing job with its ID or idempotency key: Duplicate).
//   - the error matches ErrNotSubmitted: it does not exist and this call
//     will never create it (refused before any leader's log, or rejected
//     as invalid: then it also matches ErrInvalidRequest; or no leader
//     was reached within Config.LeaderWait: then it also matches
//     ErrNoLeader).
//   - the error matches ErrMayExist: the context ended (or the controller
//     closed) while an attempt's outcome was unknown. It exists at most
//     once; resubmit with the ID from the *SubmitError to find out.
//
// Submit retries internally, with the same ID, across leader changes and
// unknown outcomes until it knows the outcome or ctx ends, or no leader
// was reached for Config.LeaderWait (an earlier attempt's outcome unknown:
// ErrMayExist, which quotes the ErrNoLeader error without matching it). Concurrent
// submits on a member share raft entries (see Config.BatchMaxJobs).
func (c *Controller) Submit(ctx context.Context, req SubmitRequest) (Submitted, error) {
	var out [1]SubmitResult // SubmitBatch's one-job path, its result on the stack
	c.submitOne(ctx, &req, out[:])
	return Submitted{Job: out[0].Job, Duplicate: out[0].Duplicate}, out[0].Err
}

// submitOne submits the job of req into out[0] (one part, without
// SubmitBatch's chunking).
func (c *Controller) submitOne(ctx context.Context, req *SubmitRequest, out []SubmitResult) {
	nj, size, err := c.newJob(req)
	if err != nil {
		out[0] = SubmitResult{Job: Job{ID: nj.ID}, Err: &SubmitError{ID: nj.ID, Class: ErrNotSubmitted, Cause: err}}
		return
	}
	c.submitPart(ctx, []fsm.NewJob{nj}, size, []int{0}, out)
}

// SubmitBatch submits many jobs, each with Submit's guarantees; results are
// in request order. Jobs travel together in as few raft entries as the
// batching limits allow, but each has its own outcome: one invalid job does
// not refuse the others. The error is nil when every job succeeded, else
// the first failed job's error.
func (c *Controller) SubmitBatch(ctx context.Context, reqs []SubmitRequest) ([]SubmitResult, error) {
	out := make([]SubmitResult, len(reqs))
	if len(reqs) == 1 {
		c.submitOne(ctx, &reqs[0], out)
		return out, out[0].Err
	}
	var chunk []int
	var chunkJobs []fsm.NewJob
	chunkBytes := 0
	type part struct {
		idx  []int
		jobs []fsm.NewJob
		size int
	}
	var parts []part
	flush := func() {
		if len(chunk) > 0 {
			parts = append(parts, part{chunk, chunkJobs, chunkBytes})
			chunk, chunkJobs, chunkBytes = nil, nil, 0
		}
	}
	for i := range reqs {
		nj, size, err := c.newJob(&reqs[i])
		if err != nil {
			out[i] = SubmitResult{Job: Job{ID: nj.ID}, Err: &SubmitError{ID: nj.ID, Class: ErrNotSubmitted, Cause: err}}
			continue
		}
		if len(chunk) > 0 && (len(chunk) >= c.cfg.BatchMaxJobs || chunkBytes+size > c.cfg.BatchMaxBytes) {
			flush()
		}
		chunk, chunkJobs, chunkBytes = append(chunk, i), append(chunkJobs, nj), chunkBytes+size
	}
	flush()
	if len(parts) == 1 {
		c.submitPart(ctx, parts[0].jobs, parts[0].size, parts[0].idx, out)
	} else {
		done := make(chan struct{}, len(parts))
		for _, p := range parts {
			go func() {
				c.submitPart(ctx, p.jobs, p.size, p.idx, out)
				done <- struct{}{}
			}()
		}
		for range parts {
			<-done
		}
	}
	for i := range out {
		if out[i].Err != nil {
			return out, out[i].Err
		}
	}
	return out, nil
}

// newJob builds and validates the job of req; size is its encoded size.
func (c *Controller) newJob(req *SubmitRequest) (fsm.NewJob, int, error) {
	nj := fsm.NewJob{
		ID: req.ID, Queue: req.Queue, Kind: req.Kind, Payload: req.Payload, Priority: req.Priority,
		RunAt: req.RunAt, MaxAttempts: req.MaxAttempts, Backoff: req.Backoff, IdempotencyKey: req.IdempotencyKey,
		After: req.After, OnParentFailure: req.OnParentFailure,
		Unique: req.Unique,
	}
	if nj.ID == "" {
		nj.ID = NewID()
	}
	if p := requestProblem(req); p != "" {
		return nj, 0, &classed{class: ErrInvalidRequest, cause: fmt.Errorf("%w: %s", fsm.ErrInvalidCommand, p)}
	}
	if req.Delay > 0 {
		// Job times are the log's time (fsm's log clock), which may run
		// ahead of a slow leader's clock: the delay counts from the log
		// time a command stamped now would apply at.
		nj.RunAt = c.jobs.LogTime(c.cfg.Clock()).Add(req.Delay)
	}
	if nj.MaxAttempts == 0 {
		nj.MaxAttempts = c.cfg.MaxAttempts
	}
	if nj.Backoff == (fsm.Backoff{}) {
		nj.Backoff = c.cfg.Backoff
	}
	if len(nj.Payload) > c.cfg.MaxPayload {
		return nj, 0, &classed{class: ErrInvalidRequest, cause: fmt.Errorf("%w: payload of %d bytes (max %d)", fsm.ErrTooLarge, len(nj.Payload), c.cfg.MaxPayload)}
	}
	size, err := fsm.SubmitJobSize(&nj)
	if err != nil {
		return nj, 0, mapErr(err)
	}
	return nj, size, nil
}

// requestProblem says what is wrong with req's ID or timing ("" if
// nothing): checks the state machine does not make, done here so they
// apply to new submits only.
func requestProblem(req *SubmitRequest) string {
	switch {
	case req.Delay < 0 || req.Delay > fsm.MaxDelay:
		return fmt.Sprintf("delay %v out of [0, %v]", req.Delay, fsm.MaxDelay)
	case req.Delay != 0 && !req.RunAt.IsZero():
		return "delay and run-at both set"
	case !utf8.ValidString(req.ID):
		return fmt.Sprintf("job id %q is not valid UTF-8", req.ID)
	case strings.IndexFunc(req.ID, unicode.IsControl) >= 0:
		return fmt.Sprintf("job id %q holds a control character", req.ID)
	}
	return ""
}

// submitPart submits jobs (the requests idx of out) until their outcome is
// known or ctx ends, and fills out.
func (c *Controller) submitPart(ctx context.Context, jobs []fsm.NewJob, size int, idx []int, out []SubmitResult) {
	unknown := false // an earlier attempt's outcome is unknown
	fail := func(class, cause error) {
		if class == ErrMayExist && errors.Is(cause, ErrNoLeader) {
			// ErrNoLeader says nothing was applied: an earlier attempt
			// may have been. Quoted, not matched.
			cause = errors.New(cause.Error())
		}
		for k, i := range idx {
			id := jobs[k].ID
			out[i] = SubmitResult{Job: Job{ID: id}, Err: &SubmitError{ID: id, Class: class, Cause: cause}}
		}
	}
	classOf := func() error {
		if unknown {
			return ErrMayExist
		}
		return ErrNotSubmitted
	}
	for {
		p, err := c.sub.Enqueue(coalesce.SubmitReq{Jobs: jobs, Size: size})
		if err != nil {
			fail(classOf(), err)
			return
		}
		var o coalesce.SubmitOutcome
		select {
		case o = <-p.Done():
			c.sub.Recycle(p)
		case <-ctx.Done():
			if c.sub.Withdraw(p) {
				c.sub.Recycle(p)
			} else {
				unknown = true // sent: its entry may commit
			}
			fail(classOf(), ctx.Err())
			return
		}
		if o.Err == nil {
			for k, i := range idx {
				s := &o.Subs[k]
				switch s.Outcome {
				case fsm.OutcomeCreated, fsm.OutcomeDuplicate:
					// After an unknown attempt a duplicate of this call's own
					// ID may be that attempt's job; one found by the key under
					// another ID existed before the call.
					dup := s.Outcome == fsm.OutcomeDuplicate && (!unknown || s.Job.ID != jobs[k].ID)
					out[i] = SubmitResult{Job: s.Job, Duplicate: dup}
				default:
					// Validation is deterministic: an earlier attempt was
					// refused the same way.
					out[i] = SubmitResult{Job: Job{ID: jobs[k].ID}, Err: &SubmitError{ID: jobs[k].ID, Class: ErrNotSubmitted, Cause: mapErr(s.Err())}}
				}
			}
			return
		}
		if errors.Is(o.Err, raft.ErrIndeterminate) {
			unknown = true
		}
		// No leader reached within LeaderWait: the bound of the whole
		// submit, not of one attempt.
		if errors.Is(o.Err, raft.ErrTooLarge) || errors.Is(o.Err, ErrClosed) || errors.Is(o.Err, raft.ErrClosed) ||
			errors.Is(o.Err, ErrNoLeader) || c.isClosed() {
			fail(classOf(), o.Err)
			return
		}
		// Retry with the same IDs after a short pause.
		select {
		case <-ctx.Done():
			fail(classOf(), fmt.Errorf("%w (last attempt: %v)", ctx.Err(), o.Err))
			return
		case <-c.closed:
			fail(classOf(), ErrClosed)
			return
		case <-time.After(c.retryPause()):
		}
	}
}
