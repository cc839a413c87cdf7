package jobraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobraft/jobraft/fsm"
)

// refusal reports whether err is a state machine refusal that a retry
// after an unknown attempt may owe to that attempt having applied.
func refusal(err error) bool {
	return errors.Is(err, ErrStaleLease) || errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound)
}

// applyResolving proposes cmd; if an attempt's outcome is unknown it
// retries while ctx allows, and until no leader was reached for
// LeaderWait. A retry refused (refusal) after an unknown
// attempt is resolved by resolve, given a linearizable read of job id:
// applied means the earlier attempt applied; !known means the read cannot
// tell, and the error is ErrOutcomeUnknown. A nil resolve means the
// command is idempotent in effect (extend, pause, resume): the refusal is
// the answer. Every error is of exactly one outcome class.
func (c *Controller) applyResolving(ctx context.Context, cmd fsm.Command, id string, resolve func(fsm.Job) (applied, known bool)) (fsm.Result, error) {
	var unknown error // the first attempt whose outcome was unknown
	for {
		r, err := c.apply(ctx, cmd)
		switch {
		case err == nil:
			return r, nil
		case errors.Is(err, ErrOutcomeUnknown):
			if unknown == nil {
				unknown = err
			}
		case errors.Is(err, ErrNotApplied) && !errors.Is(err, ErrNoLeader) && ctx.Err() == nil && !c.isClosed():
			// nothing happened; Propose gave up only on its own timeout
			// (no leader reached within LeaderWait ends the retries)
		case unknown != nil && refusal(err) && resolve != nil:
			return c.resolve(ctx, id, r, err, unknown, resolve)
		case unknown != nil && !refusal(err):
			return r, unknownOutcome(unknown, err)
		default:
			return r, err
		}
		if ctx.Err() != nil || c.isClosed() {
			if unknown != nil {
				return r, unknownOutcome(unknown, err)
			}
			return r, err
		}
	}
}

// resolve settles a retry refused with refused after the unknown attempt
// unknown (see applyResolving).
func (c *Controller) resolve(ctx context.Context, id string, r fsm.Result, refused, unknown error, resolve func(fsm.Job) (applied, known bool)) (fsm.Result, error) {
	j, err := c.Get(ctx, id, Linearizable)
	if err != nil {
		// Not found after an unknown attempt: the attempt may have
		// applied and retention swept the job since. Or the read failed.
		return r, unknownOutcome(unknown, fmt.Errorf("%v (resolving: %v)", refused, err))
	}
	switch applied, known := resolve(j); {
	case applied:
		return fsm.Result{Jobs: []fsm.Job{j}}, nil
	case !known:
		return r, unknownOutcome(unknown, refused)
	}
	return r, refused // the unknown attempt never applied: the refusal stands
}

// Cancel cancels a pending, scheduled or running job (a running job's lease
// is fenced: the worker's Ack/Nak/Extend/Term get ErrStaleLease, and a
// Run handler's context is canceled). ErrInvalidState if it already
// finished, ErrNotFound if it does not exist. Unknown outcomes are retried
// and resolved (canceled by then counts as success).
func (c *Controller) Cancel(ctx context.Context, id, reason string) (Job, error) {
	reason = truncate(reason, fsm.MaxMessage)
	r, err := c.applyResolving(ctx, &fsm.CancelCmd{ID: id, Reason: reason}, id, func(j Job) (bool, bool) { return j.State == StateCanceled, true })
	return oneJob(r, err)
}

// Retry makes a dead or canceled job pending again with a fresh attempt
// budget. ErrInvalidState for other states. Unknown outcomes are retried
// and resolved.
func (c *Controller) Retry(ctx context.Context, id string) (Job, error) {
	r, err := c.applyResolving(ctx, &fsm.RetryCmd{ID: id}, id, func(j Job) (bool, bool) {
		return j.State == StatePending || j.State == StateRunning || j.State == StateScheduled || j.State == StateSucceeded || j.State == StateWaiting, true
	})
	return oneJob(r, err)
}

// Pause stops claims from queue (it keeps accepting submits); Resume undoes
// it. Both are idempotent and retried until known.
func (c *Controller) Pause(ctx context.Context, queue string) error {
	_, err := c.applyResolving(ctx, &fsm.PauseCmd{Queue: queue}, "", nil)
	return err
}

// Resume resumes a paused queue.
func (c *Controller) Resume(ctx context.Context, queue string) error {
	_, err := c.applyResolving(ctx, &fsm.ResumeCmd{Queue: queue}, "", nil)
	return err
}

func oneJob(r fsm.Result, err error) (Job, error) {
	if err != nil {
		return Job{}, err
	}
	if len(r.Jobs) == 0 {
		return Job{}, classify(errors.New("jobraft: empty result")) // ErrOutcomeUnknown
	}
	return r.Jobs[0], nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
