package watchlog

import (
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
	// Dependencies and batches (fsm deps.go): in the entry that ended the
	// parent or the last member.
	EventReleased       EventKind = "released"        // a waiting job's last parent succeeded: pending or scheduled
	EventParentFailed   EventKind = "parent-failed"   // a parent failed: the waiting job is canceled or dead (State)
	EventBatchCompleted EventKind = "batch-completed" // every member of Batch ended: Succeeded, Failed; its completion job's submitted event follows
	EventError          EventKind = "error"           // the last event of a watch: Err says why it ended
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
	// Batch: the batch of the job (its events) or the batch completed;
	// Succeeded and Failed: batch-completed, its members' ends.
	Batch             string
	Succeeded, Failed int

	// sum: naked, termed: the request sum of the nak or term
	// (fsm.LeaseEnd.Sum), which tells it from another of its kind
	// (Recorder.LeaseEnd).
	sum uint64
}

// events turns an applied command's result into job events, in one
// slice of the size eventCount bounds.
func (r *Recorder) events(e fsm.Entry, res *fsm.Result) (evs []Event, ready bool) {
	if n := eventCount(res); n > 0 {
		evs = make([]Event, 0, n)
	}
	return r.appendEvents(evs, e, res)
}

// eventCount is the most events appendEvents makes of res (what it makes
// unless a job was a duplicate or a command a repeat).
func eventCount(res *fsm.Result) int {
	switch res.Command {
	case fsm.CmdPause, fsm.CmdResume, fsm.CmdSweep:
		return 1
	}
	n := len(res.Submitted) + len(res.Jobs) + len(res.Expired) + len(res.Cascade) + len(res.Completed)
	for i := range res.Batch {
		n += eventCount(&res.Batch[i])
	}
	return n
}

// appendEvents appends the events of res to evs.
func (r *Recorder) appendEvents(evs []Event, e fsm.Entry, res *fsm.Result) (_ []Event, ready bool) {
	ev := func(kind EventKind, j *fsm.Job) Event {
		x := Event{Index: e.Index, Time: e.Time, Kind: kind, JobID: j.ID, Queue: j.Queue, JobKind: j.Kind, State: j.State, Attempt: j.Attempts, Batch: j.Batch}
		if j.Lease != nil {
			x.Token, x.Worker = j.Lease.Token, j.Lease.Worker
		}
		if (kind == EventNaked || kind == EventTermed) && j.LastLease != nil {
			x.sum = j.LastLease.Sum
		}
		return x
	}
	switch res.Command {
	case fsm.CmdBatch:
		for i := range res.Batch {
			if res.Batch[i].Err() != nil {
				continue
			}
			var subReady bool
			evs, subReady = r.appendEvents(evs, e, &res.Batch[i])
			ready = ready || subReady
		}
	case fsm.CmdSubmit:
		for i := range res.Submitted {
			s := &res.Submitted[i]
			if s.Outcome == fsm.OutcomeCreated {
				evs = append(evs, ev(EventSubmitted, &s.Job))
				ready = ready || s.Job.State == fsm.StatePending
			}
		}
	case fsm.CmdClaim:
		if !res.Changed {
			return evs, false // a repeat of a claim with the same ID
		}
		for i := range res.Jobs {
			evs = append(evs, ev(EventClaimed, &res.Jobs[i]))
		}
	case fsm.CmdExtend, fsm.CmdAck, fsm.CmdNak, fsm.CmdTerm, fsm.CmdCancel, fsm.CmdRetry:
		if !res.Changed && (res.Command == fsm.CmdAck || res.Command == fsm.CmdNak || res.Command == fsm.CmdTerm) {
			return evs, false // a repeat of the finish that ended the lease
		}
		kind := jobEvent(res.Command)
		for i := range res.Jobs {
			evs = append(evs, ev(kind, &res.Jobs[i]))
		}
		ready = res.Command == fsm.CmdNak || res.Command == fsm.CmdRetry
	case fsm.CmdExpire:
		for _, id := range res.Expired {
			j, _ := r.jobs.Head(id) // on the apply goroutine: no payload copied
			j.ID = id
			evs = append(evs, ev(EventExpired, &j))
		}
		ready = true // expiry also promotes due scheduled jobs
	case fsm.CmdPause, fsm.CmdResume:
		if !res.Changed {
			return evs, false
		}
		c, err := fsm.DecodeCommand(e.Cmd)
		if err != nil {
			return evs, false
		}
		x := Event{Index: e.Index, Time: e.Time, Kind: EventPaused}
		switch c := c.(type) {
		case *fsm.PauseCmd:
			x.Queue = c.Queue
		case *fsm.ResumeCmd:
			x.Kind, x.Queue = EventResumed, c.Queue
			ready = true
		}
		evs = append(evs, x)
	case fsm.CmdSweep:
		if res.Removed > 0 {
			evs = append(evs, Event{Index: e.Index, Time: e.Time, Kind: EventSwept, Removed: res.Removed})
		}
	}
	// What the command moved through dependencies and batches, in its
	// order: dependents released or failed, then the batches completed,
	// then their completion jobs (Cascade ends with those).
	completed := false
	for i := range res.Cascade {
		c := &res.Cascade[i]
		kind := EventReleased
		switch c.Kind {
		case fsm.CascadeFailed:
			kind = EventParentFailed
		case fsm.CascadeCompletion:
			kind = EventSubmitted
		}
		if c.Kind == fsm.CascadeCompletion && !completed {
			evs, completed = appendCompleted(evs, e, res), true
		}
		evs = append(evs, ev(kind, &c.Job))
		ready = ready || c.Job.State == fsm.StatePending
	}
	if !completed {
		evs = appendCompleted(evs, e, res)
	}
	return evs, ready
}

// appendCompleted appends the batch-completed events of res.
func appendCompleted(evs []Event, e fsm.Entry, res *fsm.Result) []Event {
	for _, b := range res.Completed {
		evs = append(evs, Event{Index: e.Index, Time: e.Time, Kind: EventBatchCompleted, Batch: b.ID, Succeeded: b.Counts.Succeeded, Failed: b.Failed()})
	}
	return evs
}

// jobEvent is the event kind of a command that changes one job.
func jobEvent(t fsm.CommandType) EventKind {
	switch t {
	case fsm.CmdExtend:
		return EventExtended
	case fsm.CmdAck:
		return EventAcked
	case fsm.CmdNak:
		return EventNaked
	case fsm.CmdTerm:
		return EventTermed
	case fsm.CmdCancel:
		return EventCanceled
	}
	return EventRetried
}

func eventSize(ev *Event) int { return 96 + len(ev.JobID) + len(ev.Queue) + len(ev.Worker) }
