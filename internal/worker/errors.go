package worker

import (
	"errors"
	"time"
)

// ErrLeaseLost is the cause of a handler context canceled because the job's
// lease ended (context.Cause). jobraft.ErrLeaseLost is this error.
var ErrLeaseLost = errors.New("jobraft: lease lost")

// retryAfterError naks its job with a delay (RetryAfter).
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter makes a handler's error nak the job with delay instead of its
// backoff policy.
func RetryAfter(err error, delay time.Duration) error { return &retryAfterError{err, delay} }

// permanentError terms its job (Permanent).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent makes a handler's error term the job (dead, no more attempts).
func Permanent(err error) error { return &permanentError{err} }
