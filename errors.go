package jobraft

import (
	"errors"

	"github.com/jobraft/jobraft/fsm"
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

// Lease and job errors.
var (
	// ErrStaleLease: the lease is no longer the job's current one (it
	// expired and the job was reclaimed or rescheduled, the job was
	// canceled, or it already finished). Nothing changed; drop the job.
	// It also matches fsm.ErrStaleLease.
	ErrStaleLease = errors.New("jobraft: stale lease")
	// ErrNotFound: no job has this ID (never submitted, or removed by
	// retention). It also matches fsm.ErrNotFound.
	ErrNotFound = errors.New("jobraft: job not found")
	// ErrInvalidState: the operation does not apply to the job's state
	// (cancel of a finished job, retry of a job that is not dead or
	// canceled). It also matches fsm.ErrInvalidState.
	ErrInvalidState = errors.New("jobraft: invalid job state for operation")
	// ErrOutcomeUnknown: an operation other than a submit (claim, ack, nak,
	// extend, term, cancel, retry, pause, resume) may or may not have been
	// applied and the controller could not find out before the context
	// ended. It also matches raft.ErrIndeterminate.
	ErrOutcomeUnknown = errors.New("jobraft: outcome unknown")
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
	// ErrClosed: the controller was closed.
	ErrClosed = errors.New("jobraft: controller closed")
	// ErrInvalidConfig: Config failed validation.
	ErrInvalidConfig = errors.New("jobraft: invalid config")
	// ErrInvalidRequest: a request field is out of range. It wraps the fsm
	// sentinel (fsm.ErrInvalidCommand, fsm.ErrTooLarge) when there is one.
	ErrInvalidRequest = errors.New("jobraft: invalid request")
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

// mapped is an fsm refusal as the controller reports it: matches both the
// controller sentinel and the fsm one.
type mapped struct {
	sentinel error
	cause    error
}

func (e *mapped) Error() string   { return e.cause.Error() }
func (e *mapped) Unwrap() []error { return []error{e.sentinel, e.cause} }

// mapErr turns an fsm refusal into the controller's error.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fsm.ErrStaleLease):
		return &mapped{ErrStaleLease, err}
	case errors.Is(err, fsm.ErrNotFound):
		return &mapped{ErrNotFound, err}
	case errors.Is(err, fsm.ErrInvalidState):
		return &mapped{ErrInvalidState, err}
	case errors.Is(err, fsm.ErrInvalidCommand), errors.Is(err, fsm.ErrTooLarge):
		return &mapped{ErrInvalidRequest, err}
	}
	return err
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
