package logdigest

import "errors"

// Errors returned by Serve for a request it refuses (nothing is read). Over
// the RPC channel only their text arrives.
var (
	// ErrBadRequest: the request is not JSON, or its range or part count is
	// outside the protocol's limits (From > To, Parts not in 1..MaxParts,
	// more than MaxEntries entries).
	ErrBadRequest = errors.New("logdigest: bad digest request")
	// ErrUnknownOp: the request's Op is not "info", "digests" or "entries".
	ErrUnknownOp = errors.New("logdigest: unknown digest op")
)
