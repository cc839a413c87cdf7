package jobraft

import (
	"context"
	"slices"
	"time"

	"github.com/jobraft/jobraft/internal/watchlog"
)

// EventKind says what happened to a job.
type EventKind = watchlog.EventKind

// Event kinds. A command that changes nothing (a duplicate submit, a
// refused ack, a repeated ack, an expiry that found nothing) produces no
// event.
const (
	EventSubmitted = watchlog.EventSubmitted // a job was created (pending or scheduled)
	EventClaimed   = watchlog.EventClaimed   // leased: Token, Worker, Attempt
	EventExtended  = watchlog.EventExtended  // a lease was extended
	EventAcked     = watchlog.EventAcked     // succeeded
	EventNaked     = watchlog.EventNaked     // attempt failed: scheduled again or dead (State)
	EventTermed    = watchlog.EventTermed    // failed permanently: dead
	EventCanceled  = watchlog.EventCanceled  // canceled (a running job's lease is fenced)
	EventRetried   = watchlog.EventRetried   // a dead or canceled job is pending again
	EventExpired   = watchlog.EventExpired   // a lease expired: scheduled again or dead (State)
	EventPaused    = watchlog.EventPaused    // Queue was paused
	EventResumed   = watchlog.EventResumed   // Queue was resumed
	EventSwept     = watchlog.EventSwept     // retention removed Removed terminal jobs
	// Dependencies and batches (docs/dependencies.md).
	EventReleased       = watchlog.EventReleased       // a waiting job's last parent succeeded
	EventParentFailed   = watchlog.EventParentFailed   // a parent failed: the waiting job is canceled or dead (State)
	EventBatchCompleted = watchlog.EventBatchCompleted // every member of Batch ended: Succeeded, Failed
	EventError          = watchlog.EventError          // the last event of a watch: Err says why it ended
)

// Event is one committed change, as every member applies it (its fields:
// watchlog.Event). Index is the raft index of the entry that made it (one
// entry may make several events, which share the index); Time is that
// entry's log time, the time job records show for the change; State and
// Attempt are the job's after the event; Token and Worker the lease's
// (claimed, extended); Removed counts a sweep's jobs; Err says why a
// watch ended (EventError).
type Event = watchlog.Event

// WatchFilter selects events; empty fields select everything.
type WatchFilter struct {
	Queues []string
	Kinds  []EventKind
	JobID  string
	// Batch selects the events of one batch: its members' and its
	// completion.
	Batch string
}

func (f *WatchFilter) match(ev *Event) bool {
	if f.JobID != "" && ev.JobID != f.JobID {
		return false
	}
	if f.Batch != "" && ev.Batch != f.Batch {
		return false
	}
	if len(f.Queues) > 0 && ev.Queue != "" && !slices.Contains(f.Queues, ev.Queue) {
		return false
	}
	return len(f.Kinds) == 0 || slices.Contains(f.Kinds, ev.Kind)
}

// Watch streams the job events this member applies, in index order, from
// fromIndex on (0: only events applied after the call). Every member
// applies the same committed entries, so every member yields the same
// events for the same indexes; a member that is behind yields them later.
//
// Resuming: remember the Index of the last event handled and call Watch
// again with Index+1 (on any member). Events are retained in memory only,
// bounded by Config.WatchRetainEntries/WatchRetainBytes, and a restarted
// member retains only what it applied since its last snapshot. If
// fromIndex is below the oldest retained index, Watch returns a
// *CompactedError (errors.Is ErrCompacted): reconcile with List, then watch
// from CompactedError.Oldest. A watcher that falls that far behind while
// streaming gets a final EventError event with such an error.
//
// The channel is closed after a final EventError event (Err: ErrCompacted,
// ErrClosed or the context's error). A slow reader delays only itself.
// Sweep events carry no queue and pass any queue filter.
func (c *Controller) Watch(ctx context.Context, fromIndex uint64, filter WatchFilter) (<-chan Event, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if fromIndex == 0 {
		_, last := c.rec.Bounds()
		fromIndex = max(last, c.jobs.AppliedIndex()) + 1
	}
	if _, _, _, oldest, compacted := c.rec.Since(fromIndex, 0); compacted {
		return nil, &CompactedError{From: fromIndex, Oldest: oldest}
	}
	out := make(chan Event, 64)
	started := c.spawn(func() {
		defer close(out)
		final := func(err error) {
			select {
			case out <- Event{Kind: EventError, Err: err}:
			case <-time.After(time.Second): // the reader is gone
			}
		}
		cursor := fromIndex
		for {
			evs, next, changed, oldest, compacted := c.rec.Since(cursor, 256)
			if compacted {
				final(&CompactedError{From: cursor, Oldest: oldest})
				return
			}
			for i := range evs {
				if !filter.match(&evs[i]) {
					continue
				}
				select {
				case out <- evs[i]:
				case <-ctx.Done():
					final(ctx.Err())
					return
				case <-c.closed:
					final(ErrClosed)
					return
				}
			}
			if next > cursor {
				cursor = next
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
				final(ctx.Err())
				return
			case <-c.closed:
				final(ErrClosed)
				return
			}
		}
	})
	if !started {
		return nil, ErrClosed
	}
	return out, nil
}
