package jobraft

import (
	"context"
	"errors"
)

// Wait returns job id once it has finished: succeeded, dead or canceled
// (State.Terminal), as this member applied it, with its result or last
// error. A job already finished is returned at once. Wait costs no
// polling and no watch: it registers with this member's apply loop for the
// job's finish (woken by the entry that leaves the job terminal, or by a
// snapshot restore) and then reads the job locally; a job made live again
// before that read (retried) is waited on again.
//
// Errors: ErrNotFound (no job has this ID, or retention removed it since
// it finished), ErrClosed, the context's error, or the error of a
// linearizable read (as Get). Wait changes nothing.
func (c *Controller) Wait(ctx context.Context, id string) (Job, error) {
	for {
		// Registered before the read: a finish applied after the read
		// closes done.
		done, stop := c.rec.Finished(id)
		j, err := c.Get(ctx, id, Local)
		if errors.Is(err, ErrNotFound) {
			// This member may not have applied the submit yet.
			j, err = c.Get(ctx, id, Linearizable)
		}
		if err != nil || j.State.Terminal() {
			stop()
			return j, err
		}
		select {
		case <-done: // the local state is now at least as new as the finish
		case <-ctx.Done():
			stop()
			return Job{}, ctx.Err()
		case <-c.closed:
			stop()
			return Job{}, ErrClosed
		}
		// Most often the job is still finished: read it without
		// registering again (a registration is needed only to wait on);
		// otherwise (retried, or not found here after a restore) as above.
		if j, err = c.Get(ctx, id, Local); err == nil && j.State.Terminal() {
			return j, nil
		}
	}
}
