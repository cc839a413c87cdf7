package jobraft

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Submit outcomes. Every error Submit and SubmitBatch return for a job
// matches exactly one of these two (errors.Is), besides its cause.
var (
	// ErrNotSubmitted: the job does not exist and never will from this
	// call: every attempt was refused before reaching a leader's log, or
	// the job itself was rejected (invalid, too large). Resubmitting is
	// safe.
	ErrNotSubmitted = errors.New("jobraft: job not submitted")
	// ErrMayExist: the outcome is unknown (the context ended or the
	// controller closed while an attempt's outcome was unknown). The job
	// exists at most once; resubmit with the same ID (SubmitRequest.ID or
	// the ID in the error's SubmitError) to learn which.
	ErrMayExist = errors.New("jobraft: job may exist")
)

// Operation outcomes. Every error Claim, Ack, Nak, Extend, Term, Cancel,
// Retry, Pause and Resume return matches exactly one of ErrOutcomeUnknown,
// ErrNotApplied, ErrStaleLease, ErrNotFound, ErrInvalidState,
// ErrInvalidRequest, ErrQueuePaused and ErrClosed (errors.Is), so a caller
// can switch on them in any order. Its cause stays matchable (a raft
// proposal error, the fsm sentinel, a context error) unless the cause
// itself belongs to another class: then it is only quoted in the message
// (an attempt refused as stale after an earlier attempt's outcome was
// unknown is ErrOutcomeUnknown, not ErrStaleLease).
var (
	// ErrOutcomeUnknown: the operation may or may not have been applied,
	// and the controller could not find out before the context ended or
	// the controller closed (an attempt's outcome was unknown and no later
	// attempt or read settled it). It also matches raft.ErrIndeterminate.
	ErrOutcomeUnknown = errors.New("jobraft: outcome unknown")
	// ErrNotApplied: the operation was not applied and never will be from
	// this call: every attempt was refused before reaching a leader's log
	// (no leader, or none reachable) until the context ended, or a Claim's
	// Wait ended by the context. Nothing changed; retrying is safe.
	ErrNotApplied = errors.New("jobraft: not applied")
	// ErrStaleLease: the lease is no longer the job's current one (it
	// expired and the job was reclaimed or rescheduled, the job was
	// canceled, or it finished otherwise, by another request of the same
	// kind, such as an ack with another result, or under another lease).
	// The message says how the lease ended ("lease 12 ended: acked", or
	// naked, termed, expired, canceled, superseded). Nothing changed; drop
	// the job. It also matches fsm.ErrStaleLease. (Repeating the very Ack,
	// Nak or Term that ended the lease, same token and same request, is not
	// stale: it succeeds, see Lease.Ack.)
	ErrStaleLease = errors.New("jobraft: stale lease")
	// ErrNotFound: no job has this ID (never submitted, or removed by
	// retention). It also matches fsm.ErrNotFound.
	ErrNotFound = errors.New("jobraft: job not found")
	// ErrInvalidState: the operation does not apply to the job's state
	// (cancel of a finished job, retry of a job that is not dead or
	// canceled). It also matches fsm.ErrInvalidState.
	ErrInvalidState = errors.New("jobraft: invalid job state for operation")
	// ErrQueuePaused: a claim named only paused queues. Nothing changed. It
	// also matches fsm.ErrQueuePaused.
	ErrQueuePaused = errors.New("jobraft: queue paused")
	// ErrScheduleExists: a schedule of this ID exists with another
	// definition. Nothing changed. It also matches fsm.ErrScheduleExists.
	ErrScheduleExists = errors.New("jobraft: schedule exists with another definition")
	// ErrScheduleNotFound: no schedule has this ID. It also matches
	// fsm.ErrScheduleNotFound.
	ErrScheduleNotFound = errors.New("jobraft: schedule not found")
)

// Watch errors.
var (
	// ErrCompacted: Watch was asked to start below the oldest event this
	// member still retains (see Config.WatchRetainEntries), or a watcher
	// fell so far behind that the events it needed were dropped. Restart
	// from a retained index (CompactedError.Oldest) after reconciling with
	// List.
	ErrCompacted = errors.New("jobraft: watch index compacted")
)

// Other errors.
var (
	// ErrClosed: the controller was closed (before the operation was
	// sent: an operation in flight when it closes is ErrOutcomeUnknown).
	ErrClosed = errors.New("jobraft: controller closed")
	// ErrNoLeader: no leader was reached within Config.LeaderWait (none
	// elected: too few voters reachable, or an election still under way;
	// or the one known did not answer), and nothing was applied. It comes
	// with ErrNotSubmitted (Submit), ErrNotApplied (the other operations)
	// or alone (a linearizable read: Get, List, Stats, Backup, Wait);
	// raft.NoLeaderError (errors.As) says how many voters this member
	// reached. An operation one of whose earlier attempts had an unknown
	// outcome is ErrMayExist or ErrOutcomeUnknown instead, and only quotes
	// it. It is raft.ErrNoLeader.
	ErrNoLeader = raft.ErrNoLeader
	// ErrInvalidConfig: a Config (Open) or WorkerConfig (Run) failed
	// validation. Nothing was started.
	ErrInvalidConfig = errors.New("jobraft: invalid config")
	// ErrInvalidRequest: a request field is out of range, or the command
	// is too large, or the state machine cannot read it. Nothing changed.
	// It wraps the fsm sentinel (fsm.ErrInvalidCommand, fsm.ErrTooLarge)
	// or raft.ErrTooLarge when there is one.
	ErrInvalidRequest = errors.New("jobraft: invalid request")
	// ErrBatchExists: CreateBatch named a batch that exists and that
	// another request created. Nothing changed. It also matches
	// fsm.ErrBatchExists.
	ErrBatchExists = errors.New("jobraft: batch exists")
)

// SubmitError is the error of one job of a submit: its ID (the one the
// controller assigned if the request had none) and class (ErrNotSubmitted
// or ErrMayExist).
type SubmitError struct {
	ID    string
	Class error
	Cause error
}

func (e *SubmitError) Error() string {
	s := e.Class.Error() + " (job " + e.ID + ")"
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the class and the cause.
func (e *SubmitError) Unwrap() []error { return []error{e.Class, e.Cause} }

// ErrCodec: a typed job's arguments or result did not encode or decode
// with its kind's codec (Kind). Every *CodecError matches it.
var ErrCodec = errors.New("jobraft: codec")

// CodecError is the diagnostic of ErrCodec (errors.As): which kind, job
// (empty before it was submitted) and operation, and how many bytes did
// not decode. Its text never quotes the bytes or the values, nor the
// codec's own text (which may: a JSON syntax error quotes the offending
// character); the codec's error is Err (errors.As reaches it).
type CodecError struct {
	Kind  string
	JobID string
	Op    string // "encode arguments", "decode arguments", "encode result", "decode result"
	Len   int    // decode: the length of the bytes that did not decode
	Err   error
}

func (e *CodecError) Error() string {
	s := "jobraft: kind " + strconv.Quote(e.Kind)
	if e.JobID != "" {
		s += ", job " + e.JobID
	}
	s += ": " + e.Op
	if strings.HasPrefix(e.Op, "decode") {
		s += " (" + strconv.Itoa(e.Len) + " bytes)"
	}
	return s + fmt.Sprintf(" failed (%T)", e.Err)
}

// Unwrap returns ErrCodec and the codec's error.
func (e *CodecError) Unwrap() []error { return []error{ErrCodec, e.Err} }

// CompactedError says which events are still retained.
type CompactedError struct {
	From   uint64 // the index asked for
	Oldest uint64 // the oldest index Watch can start from now
}

func (e *CompactedError) Error() string {
	return ErrCompacted.Error() + ": asked for index " + utoa(e.From) + ", oldest retained " + utoa(e.Oldest)
}

// Unwrap returns ErrCompacted.
func (e *CompactedError) Unwrap() error { return ErrCompacted }

// classed is an error of one outcome class: it matches class and cause
// (nil: none), and quotes detail (an error of another class, which must
// not match) in its message.
type classed struct {
	class  error
	cause  error
	detail string
}

// Error names the class once: a cause that restates it (the state
// machine's mirror sentinel, "fsm: invalid job state for command") is
// quoted by its detail only, and an fsm cause loses its package prefix, so
// the text reads "jobraft: invalid job state for operation: cannot cancel
// canceled job ..." (every sentinel still matches: errors.Is).
func (e *classed) Error() string {
	s := e.class.Error()
	if e.cause != nil {
		s += ": " + causeText(e.class, e.cause)
	}
	if e.detail != "" {
		s += "; " + e.detail
	}
	return s
}

// causeText is cause's text under class: without the fsm sentinel class
// mirrors, or else without the "fsm: " prefix.
func causeText(class, cause error) string {
	t := cause.Error()
	var mirror error
	switch class {
	case ErrStaleLease:
		mirror = fsm.ErrStaleLease
	case ErrNotFound:
		mirror = fsm.ErrNotFound
	case ErrInvalidState:
		mirror = fsm.ErrInvalidState
	case ErrQueuePaused:
		mirror = fsm.ErrQueuePaused
	case ErrScheduleExists:
		mirror = fsm.ErrScheduleExists
	case ErrScheduleNotFound:
		mirror = fsm.ErrScheduleNotFound
	case ErrInvalidRequest:
		mirror = fsm.ErrInvalidCommand
	}
	if mirror != nil {
		if rest, ok := strings.CutPrefix(t, mirror.Error()+": "); ok {
			return rest
		}
	}
	if rest, ok := strings.CutPrefix(t, "fsm: "); ok {
		return rest
	}
	return t
}

// Unwrap returns the class and the cause; ErrOutcomeUnknown also matches
// raft.ErrIndeterminate.
func (e *classed) Unwrap() []error {
	out := []error{e.class}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	if e.class == ErrOutcomeUnknown && !errors.Is(e.cause, raft.ErrIndeterminate) {
		out = append(out, raft.ErrIndeterminate)
	}
	return out
}

// mapErr turns an fsm refusal (or EncodeCommand's error) into the
// controller's class, keeping the fsm sentinel matchable; other errors
// pass unchanged.
func mapErr(err error) error {
	if err == nil {
		return nil // without the escaping target below: the hot path
	}
	return mapRefusal(err)
}

func mapRefusal(err error) error {
	var ce *classed
	switch {
	case errors.As(err, &ce):
		return err // classed already
	case errors.Is(err, fsm.ErrStaleLease):
		return &classed{class: ErrStaleLease, cause: err}
	case errors.Is(err, fsm.ErrNotFound):
		return &classed{class: ErrNotFound, cause: err}
	case errors.Is(err, fsm.ErrInvalidState):
		return &classed{class: ErrInvalidState, cause: err}
	case errors.Is(err, fsm.ErrQueuePaused):
		return &classed{class: ErrQueuePaused, cause: err}
	case errors.Is(err, fsm.ErrBatchExists):
		return &classed{class: ErrBatchExists, cause: err}
	case errors.Is(err, fsm.ErrScheduleExists):
		return &classed{class: ErrScheduleExists, cause: err}
	case errors.Is(err, fsm.ErrScheduleNotFound):
		return &classed{class: ErrScheduleNotFound, cause: err}
	case errors.Is(err, fsm.ErrInvalidCommand), errors.Is(err, fsm.ErrTooLarge),
		errors.Is(err, fsm.ErrUnknownCommand), errors.Is(err, fsm.ErrUnsupportedVersion),
		errors.Is(err, fsm.ErrUnknownParent), errors.Is(err, fsm.ErrDependencyCycle), errors.Is(err, fsm.ErrParentFailed),
		errors.Is(err, fsm.ErrBadCron), errors.Is(err, fsm.ErrBadInterval), errors.Is(err, fsm.ErrUnknownZone):
		// A job's parents: unknown, a cycle, or failed (submit, retry); a
		// schedule's cron expression, interval or zone.
		// The last two: the applying member's build cannot read this
		// command. Nothing changed.
		return &classed{class: ErrInvalidRequest, cause: err}
	case errors.Is(err, fsm.ErrIndexNotIncreasing):
		return &classed{class: ErrNotApplied, cause: err}
	}
	return err
}

// opClasses are the outcome classes of the non-submit operations.
var opClasses = []error{ErrOutcomeUnknown, ErrNotApplied, ErrStaleLease, ErrNotFound, ErrInvalidState,
	ErrInvalidRequest, ErrQueuePaused, ErrClosed, ErrBatchExists, ErrScheduleExists, ErrScheduleNotFound}

// classify returns err, the error of one attempt of an operation (a
// proposal error, an fsm refusal, a result that cannot be decoded, a
// context error), as an error of exactly one outcome class. What it cannot
// place is ErrOutcomeUnknown: failing closed, never "nothing happened".
func classify(err error) error {
	if err == nil {
		return nil
	}
	err = mapErr(err)
	var ce *classed
	switch {
	case errors.As(err, &ce) || err == ErrClosed:
		return err
	case errors.Is(err, ErrClosed):
		return &classed{class: ErrClosed, detail: err.Error()}
	case errors.Is(err, raft.ErrIndeterminate):
		return &classed{class: ErrOutcomeUnknown, cause: err}
	case errors.Is(err, raft.ErrRejected) && errors.Is(err, raft.ErrTooLarge):
		return &classed{class: ErrInvalidRequest, cause: err}
	case errors.Is(err, raft.ErrRejected) && errors.Is(err, raft.ErrClosed):
		return &classed{class: ErrClosed, cause: err}
	case errors.Is(err, raft.ErrRejected), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Rejected: refused before any leader's log. A bare context
		// error: nothing was sent (Claim's wait).
		return &classed{class: ErrNotApplied, cause: err}
	}
	return &classed{class: ErrOutcomeUnknown, cause: err}
}

// unknownOutcome is the error of an operation one of whose attempts
// (first, already ErrOutcomeUnknown) had an unknown outcome, and whose
// last attempt failed with last (any class): ErrOutcomeUnknown only, last
// quoted.
func unknownOutcome(first, last error) error {
	e := &classed{class: ErrOutcomeUnknown}
	var ce *classed
	if errors.As(first, &ce) && ce.class == ErrOutcomeUnknown {
		e.cause = ce.cause
	}
	if last != nil && last != first {
		e.detail = "last attempt: " + last.Error()
	}
	return e
}

func utoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}
