package jobraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobraft/jobraft/fsm"
)

// BatchInfo is a batch's status: its members counted by state, and once
// every member ended, its completion (see fsm.BatchInfo).
type BatchInfo = fsm.BatchInfo

// BatchRequest is a batch to create: its jobs, submitted together in one
// raft entry, and the job to create once every one of them ended.
type BatchRequest struct {
	// ID names the batch: 1..fsm.MaxNameLen bytes, unique among the
	// batches held (a completed batch is held until a sweep with a
	// MaxAge removes it).
	ID string
	// Jobs are the members (at most fsm.MaxSubmit, all in one entry of at
	// most the raft entry limit). They may name each other as parents
	// (After). Each is answered as Submit answers it; the ones rejected
	// are not members.
	Jobs []SubmitRequest
	// Completion, if set, is the job created, exactly once, in the entry
	// where the batch's last member ends (it may not name parents).
	Completion *SubmitRequest
}

// BatchResult is what CreateBatch did: the batch as this member holds it
// once it applied the creating entry (zero if the context ended before
// this member applied it), and each job's outcome, in request order.
type BatchResult struct {
	Batch BatchInfo
	Jobs  []SubmitResult
}

// CreateBatch creates a batch: its jobs in one entry, and a record that
// counts them by state and completes when every one of them ended
// (succeeded, dead or canceled; a watch sees EventBatchCompleted), then
// creates the completion job once. A batch whose every job is rejected
// completes at once.
//
// Errors: ErrInvalidRequest (a bad ID, job or template: nothing was
// submitted), ErrBatchExists (another request created a batch of this ID),
// ErrOutcomeUnknown (the context ended while an attempt's outcome was
// unknown: call again with the same request, job IDs included, to learn
// it), ErrNotApplied, ErrClosed. The call retries across leader changes
// and unknown outcomes; a retry that finds the batch created by this very
// request (the same jobs, IDs included: fsm.BatchInfo.Sum) answers it
// as created.
func (c *Controller) CreateBatch(ctx context.Context, req BatchRequest) (BatchResult, error) {
	cmd, err := c.batchCommand(&req)
	if err != nil {
		return BatchResult{}, err
	}
	sum := cmd.Sum()
	unknown := false
	for {
		r, err := c.apply(ctx, cmd)
		switch {
		case err == nil:
			// The answer's batch is this member's, once it applied the
			// entry (the leader may have answered first; if ctx ends
			// before, Batch is what this member holds: zero, or later).
			_ = c.node.WaitApplied(ctx, r.Index)
			return c.batchAnswer(cmd, r.Submitted, unknown), nil
		case errors.Is(err, ErrBatchExists):
			return c.ownBatch(ctx, cmd, sum, err)
		case errors.Is(err, ErrOutcomeUnknown):
			unknown = true
		case errors.Is(err, ErrNotApplied) && !errors.Is(err, ErrNoLeader):
		default:
			if unknown && !errors.Is(err, ErrInvalidRequest) {
				return BatchResult{}, unknownOutcome(err, err)
			}
			return BatchResult{}, err
		}
		if ctx.Err() != nil || c.isClosed() {
			if unknown {
				return BatchResult{}, unknownOutcome(err, err)
			}
			return BatchResult{}, err
		}
	}
}

// batchCommand is req's submit, every job and the completion job with an
// ID (so the call's retries are the same request).
func (c *Controller) batchCommand(req *BatchRequest) (*fsm.SubmitCmd, error) {
	bad := func(err error) error { return &classed{class: ErrInvalidRequest, cause: err} }
	if len(req.Jobs) > fsm.MaxSubmit {
		return nil, bad(fmt.Errorf("%w: batch of %d jobs (max %d)", fsm.ErrTooLarge, len(req.Jobs), fsm.MaxSubmit))
	}
	cmd := &fsm.SubmitCmd{Jobs: make([]fsm.NewJob, len(req.Jobs)), Batch: &fsm.BatchSpec{ID: req.ID}}
	for i := range req.Jobs {
		nj, _, err := c.newJob(&req.Jobs[i])
		if err != nil {
			return nil, bad(fmt.Errorf("job %d: %w", i, err))
		}
		cmd.Jobs[i] = nj
	}
	if req.Completion != nil {
		nj, _, err := c.newJob(req.Completion)
		if err != nil {
			return nil, bad(fmt.Errorf("completion job: %w", err))
		}
		cmd.Batch.Completion = &nj
	}
	if err := fsm.Validate(cmd); err != nil {
		return nil, mapErr(err)
	}
	return cmd, nil
}

// batchAnswer turns the batch's submit result into the caller's answer.
// After an unknown attempt a job found under its own ID is not a
// duplicate (that attempt may have created it).
func (c *Controller) batchAnswer(cmd *fsm.SubmitCmd, subs []fsm.Submitted, unknown bool) BatchResult {
	out := BatchResult{Jobs: make([]SubmitResult, len(cmd.Jobs))}
	out.Batch, _ = c.jobs.Batch(cmd.Batch.ID)
	for i := range cmd.Jobs {
		id := cmd.Jobs[i].ID
		if i >= len(subs) {
			out.Jobs[i] = SubmitResult{Job: Job{ID: id}, Err: &SubmitError{ID: id, Class: ErrMayExist, Cause: errors.New("jobraft: no answer for the job")}}
			continue
		}
		switch s := &subs[i]; s.Outcome {
		case fsm.OutcomeCreated, fsm.OutcomeDuplicate:
			out.Jobs[i] = SubmitResult{Job: s.Job, Duplicate: s.Outcome == fsm.OutcomeDuplicate && (!unknown || s.Job.ID != id)}
		default:
			out.Jobs[i] = SubmitResult{Job: Job{ID: id}, Err: &SubmitError{ID: id, Class: ErrNotSubmitted, Cause: mapErr(s.Err())}}
		}
	}
	return out
}

// ownBatch answers a retry refused ErrBatchExists: the batch is this
// request's when its sum is the request's (an earlier attempt created it),
// and each job is answered by a linearizable read (a job not held was
// rejected by that attempt, or swept since).
func (c *Controller) ownBatch(ctx context.Context, cmd *fsm.SubmitCmd, sum uint64, exists error) (BatchResult, error) {
	info, err := c.Batch(ctx, cmd.Batch.ID, Linearizable)
	if err != nil || info.Sum != sum {
		return BatchResult{}, exists
	}
	out := BatchResult{Batch: info, Jobs: make([]SubmitResult, len(cmd.Jobs))}
	for i := range cmd.Jobs {
		id := cmd.Jobs[i].ID
		j, ok := c.jobs.Head(id)
		if !ok || j.Batch != info.ID {
			out.Jobs[i] = SubmitResult{Job: Job{ID: id}, Err: &SubmitError{ID: id, Class: ErrNotSubmitted,
				Cause: fmt.Errorf("%w: job %q is not a member of batch %q (rejected by the submit that created it, or swept)", ErrNotFound, id, info.ID)}}
			continue
		}
		out.Jobs[i] = SubmitResult{Job: j}
	}
	return out, nil
}

// Batch returns the batch with the given ID, or ErrNotFound.
func (c *Controller) Batch(ctx context.Context, id string, cons Consistency) (BatchInfo, error) {
	if err := c.read(ctx, cons); err != nil {
		return BatchInfo{}, err
	}
	b, ok := c.jobs.Batch(id)
	if !ok {
		return BatchInfo{}, fmt.Errorf("%w: no batch %q", ErrNotFound, id)
	}
	return b, nil
}

// Batches returns up to limit batches (0: fsm.DefaultListLimit, at most
// fsm.MaxListLimit) in ID order, after the batch named after ("": from the
// first).
func (c *Controller) Batches(ctx context.Context, after string, limit int, cons Consistency) ([]BatchInfo, error) {
	if err := c.read(ctx, cons); err != nil {
		return nil, err
	}
	return c.jobs.Batches(after, limit), nil
}

// Dependents returns the IDs of the held jobs naming id as a parent, in
// ID order (whatever their state).
func (c *Controller) Dependents(ctx context.Context, id string, cons Consistency) ([]string, error) {
	if err := c.read(ctx, cons); err != nil {
		return nil, err
	}
	return c.jobs.Dependents(id), nil
}
