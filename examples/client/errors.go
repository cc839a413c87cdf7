package client

import (
	"errors"
	"fmt"
)

// Outcome classes. Every error a Client method returns matches at most one
// of these (errors.Is); a *Error carries the details.
var (
	// ErrNotFound: the job (or route) does not exist (404).
	ErrNotFound = errors.New("jobd: not found")
	// ErrRefused: the request was refused and nothing changed: invalid
	// input (400, 413, 415), a conflict with the job's state or lease
	// (409: invalid_state, stale_lease, queue_paused), a compacted watch
	// position (410).
	ErrRefused = errors.New("jobd: refused")
	// ErrUnauthorized: the token is missing or wrong (401).
	ErrUnauthorized = errors.New("jobd: unauthorized")
	// ErrOutcomeUnknown: the operation may or may not have taken effect
	// (503 outcome_unknown, a timeout, or the connection lost after the
	// request was sent), and the client could not settle it by retrying.
	// Submit settles it itself by resubmitting with the same job ID; see
	// each method for what it does.
	ErrOutcomeUnknown = errors.New("jobd: outcome unknown")
	// ErrUnavailable: no member could take the request, and nothing
	// changed (every member unreachable before the request was sent, or
	// answered 503 not_submitted, not_applied, no_leader, closed,
	// not_ready: a member without a quorum answers within its
	// -leader-wait, the reason saying how many voters it reaches).
	ErrUnavailable = errors.New("jobd: unavailable")
	// ErrNoEndpoints: Config.Endpoints is empty.
	ErrNoEndpoints = errors.New("jobd: no endpoints")
)

// Error is a reply jobd refused or failed, or a request that did not get a
// reply.
type Error struct {
	Endpoint string // the member's base URL
	Op       string // e.g. "POST /v1/jobs"
	Status   int    // HTTP status; 0 if there was no reply
	Code     string // jobd's error kind: "not_found", "outcome_unknown", ...
	Reason   string // jobd's reason (never payload bytes)
	Err      error  // the transport error when Status is 0
	class    error
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Endpoint, e.Err)
	}
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Op, e.Endpoint, e.Status, e.Code, e.Reason)
}

// Is matches the error's outcome class.
func (e *Error) Is(target error) bool { return e.class != nil && target == e.class }

// Unwrap returns the transport error, if any.
func (e *Error) Unwrap() error { return e.Err }

// classOf maps a jobd reply to an outcome class.
func classOf(status int, code string) error {
	switch {
	case status == 401:
		return ErrUnauthorized
	case status == 404:
		return ErrNotFound
	case status == 503 && code == "outcome_unknown", status == 504:
		return ErrOutcomeUnknown
	case status == 503, status == 502:
		return ErrUnavailable
	case status >= 400 && status < 500:
		return ErrRefused
	}
	return nil // 500: a bug; no class
}
