package jobraft

import (
	"context"
	"errors"
)

// Wait returns job id once it has finished: succeeded, dead or canceled
// (State.Terminal), as this member applied it, with its result or last
// error. A job already finished is returned at once. Wait follows the job
// with Watch, so it costs no polling; if the watch falls behind the
// retained history (ErrCompacted) it reads the job linearizably and
// watches again, so no outcome is missed. A job retried after it finished
// is returned as it first finished.
//
// Errors: ErrNotFound (no job has this ID, or retention removed it since
// it finished), ErrClosed, the context's error, or the error of a
// linearizable read (as Get). Wait changes nothing.
func (c *Controller) Wait(ctx context.Context, id string) (Job, error) {
	return c.wait(ctx, id, c.Watch)
}

// watchFunc is Watch's signature: the seam a test uses to make a watch
// fall behind on demand.
type watchFunc func(ctx context.Context, fromIndex uint64, filter WatchFilter) (<-chan Event, error)

func (c *Controller) wait(ctx context.Context, id string, watch watchFunc) (Job, error) {
	cons := Local
	for {
		j, err := c.waitWatching(ctx, id, watch, cons)
		if !errors.Is(err, errWatchBehind) {
			return j, err
		}
		// Events were dropped: read the job afresh, at least as new as
		// every write acknowledged so far.
		cons = Linearizable
	}
}

// errWatchBehind: the watch of waitWatching was compacted; watch again.
var errWatchBehind = errors.New("jobraft: wait: watch fell behind")

// waitWatching watches job id from this member's next applied event, then
// reads it (cons: a local read that finds nothing is confirmed
// linearizably, since this member may not have applied the submit yet).
// Every change after the read is in the watch, so a job that is not
// finished at the read is seen finishing by the watch.
func (c *Controller) waitWatching(ctx context.Context, id string, watch watchFunc, cons Consistency) (Job, error) {
	wctx, cancel := context.WithCancel(ctx)
	events, err := watch(wctx, 0, WatchFilter{JobID: id})
	if err != nil {
		cancel()
		return Job{}, err
	}
	defer func() {
		cancel()
		for range events { // the watch ends promptly once canceled
		}
	}()
	j, err := c.Get(ctx, id, cons)
	if errors.Is(err, ErrNotFound) && cons == Local {
		j, err = c.Get(ctx, id, Linearizable)
	}
	if err != nil || j.State.Terminal() {
		return j, err
	}
	for ev := range events {
		switch {
		case ev.Kind == EventError && errors.Is(ev.Err, ErrCompacted):
			return Job{}, errWatchBehind
		case ev.Kind == EventError:
			return Job{}, ev.Err
		case ev.State.Terminal():
			// This member applied the event: its state is at least as new.
			if j, err := c.Get(ctx, id, Local); err != nil || j.State.Terminal() {
				return j, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return Job{}, err
	}
	return Job{}, ErrClosed
}
