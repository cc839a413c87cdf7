package jobraft

import (
	"context"
	"slices"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// EventKind says what happened to a job.
type EventKind string

// Event kinds. A command that changes nothing (a duplicate submit, a
// refused ack, a repeated ack, an expiry that found nothing) produces no
// event.
const (
	EventSubmitted EventKind = "submitted" // a job was created (pending or scheduled)
	EventClaimed   EventKind = "claimed"   // leased: Token, Worker, Attempt
	EventExtended  EventKind = "extended"  // a lease was extended
	EventAcked     EventKind = "acked"     // succeeded
	EventNaked     EventKind = "naked"     // attempt failed: scheduled again or dead (State)
	EventTermed    EventKind = "termed"    // failed permanently: dead
	EventCanceled  EventKind = "canceled"  // canceled (a running job's lease is fenced)
	EventRetried   EventKind = "retried"   // a dead or canceled job is pending again
	EventExpired   EventKind = "expired"   // a lease expired: scheduled again or dead (State)
	EventPaused    EventKind = "paused"    // Queue was paused
	EventResumed   EventKind = "resumed"   // Queue was resumed
	EventSwept     EventKind = "swept"     // retention removed Removed terminal jobs
	EventError     EventKind = "error"     // the last event of a watch: Err says why it ended
)

// Event is one committed change, as every member applies it. Index is the
// raft index of the entry that made it (one entry may make several events,
// which share the index); Time is that entry's log time (the
// state machine's time, fsm.Jobs.LogTime: the leader's clock, never going
// backwards), the time job records show for the change.
type Event struct {
	Index   uint64
	Time    time.Time
	Kind    EventKind
	JobID   string
	Queue   string
	JobKind string
	State   fsm.State // the job's state after the event
	Attempt uint32    // the job's attempts after the event
	Token   uint64    // claimed, extended: the lease token
	Worker  string    // claimed, extended: the lease holder
	Removed uint64    // swept
	Err     error     // error: why the watch ended

	// sum: naked, termed: the request sum of the nak or term
	// (fsm.LeaseEnd.Sum), which tells it from another of its kind.
	sum uint64
}

// WatchFilter selects events; empty fields select everything.
type WatchFilter struct {
	Queues []string
	Kinds  []EventKind
	JobID  string
}

func (f *WatchFilter) match(ev *Event) bool {
	if f.JobID != "" && ev.JobID != f.JobID {
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
		_, last := c.rec.bounds()
		fromIndex = max(last, c.rec.jobs.AppliedIndex()) + 1
	}
	if _, _, _, oldest, compacted := c.rec.since(fromIndex, 0); compacted {
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
			evs, next, changed, oldest, compacted := c.rec.since(cursor, 256)
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
