package wal

import (
	"errors"

	"github.com/jobraft/jobraft/wal/segment"
)

// Sentinel errors. Every refusal of the guard is a *GuardError whose Err is
// one of these, so callers test with errors.Is and read the diagnostic with
// errors.As. "Not found" is raft.ErrLogNotFound itself. They are defined
// by package wal/segment, which the log's segment store and this guard
// share; each name here is the same error value.
var (
	// ErrZeroTerm: StoreLogs was given an entry with term 0 or index 0 (G1).
	ErrZeroTerm = segment.ErrZeroTerm
	// ErrNotContiguous: StoreLogs was given entries that do not extend the
	// log by exactly one index each (G2), or that would rewrite committed
	// history on an empty log.
	ErrNotContiguous = segment.ErrNotContiguous
	// ErrTermRegression: an entry's term is lower than its predecessor's (G2).
	ErrTermRegression = segment.ErrTermRegression
	// ErrOverwrite: StoreLogs would overwrite an existing index (G3); the
	// seam must truncate the conflicting suffix first.
	ErrOverwrite = segment.ErrOverwrite
	// ErrCommittedTruncate: DeleteRange would cut a suffix at or below the
	// commit floor, or compact a prefix above it (G4).
	ErrCommittedTruncate = segment.ErrCommittedTruncate
	// ErrInvalidRange: DeleteRange asked for a range that is neither a
	// prefix, a suffix nor the whole log (a hole), or min > max.
	ErrInvalidRange = segment.ErrInvalidRange
	// ErrPayloadMismatch: an entry's body does not match its stamp (G5). On
	// a read this means the stored bytes rotted; such errors also match
	// ErrCorrupt.
	ErrPayloadMismatch = segment.ErrPayloadMismatch
	// ErrUnstamped: a command entry arrived without a stamp while the guard
	// requires one (RequireStamp), or a stored entry carries none.
	ErrUnstamped = segment.ErrUnstamped
	// ErrTooLarge: StoreLogs was given an entry whose record exceeds what
	// the segment format holds (1 GiB with its header and extensions), or a
	// batch whose frame body exceeds 4 GiB; written, Open could not read it
	// back.
	ErrTooLarge = segment.ErrTooLarge
	// ErrCorrupt: stored bytes failed their own checksum or structure check
	// (G7). Open refuses a log with corruption before its torn tail.
	ErrCorrupt = segment.ErrCorrupt
	// ErrFailed: an earlier write or fsync failed; the log refuses every
	// write until it is reopened (an fsync is never retried).
	ErrFailed = segment.ErrFailed
	// ErrClosed: the log was closed.
	ErrClosed = segment.ErrClosed
	// ErrKeyNotFound is returned by the stable store for a missing key. Its
	// text is "not found" because hashicorp/raft compares the text.
	ErrKeyNotFound = segment.ErrKeyNotFound
	// ErrBadTerms is returned by AdoptTerms for a list that is not a term
	// index of the log it would describe.
	ErrBadTerms = segment.ErrBadTerms
)

// Op names the operation a GuardError refused.
type Op = segment.Op

// Operations checked by the guard.
const (
	OpStore  = segment.OpStore
	OpDelete = segment.OpDelete
	OpGet    = segment.OpGet
	OpOpen   = segment.OpOpen
)

// GuardError is the diagnostic of a refusal, or of damage found on a read
// or at Open. It never carries payload bytes: only lengths, CRCs and
// equality flags. Its fields and methods are documented in wal/segment.
type GuardError = segment.GuardError

// Failure classes: what made a log fail closed (Log.Failure). They name
// the operation, never the data.
const (
	// FailSync: an fsync of a segment, a mark or the directory failed.
	FailSync = segment.FailSync
	// FailWrite: a write (or a segment's creation) failed.
	FailWrite = segment.FailWrite
	// FailNoSpace: a write or sync found the disk full (ENOSPC).
	FailNoSpace = segment.FailNoSpace
)

// IsCorrupt reports whether err means stored bytes are damaged: a record
// failing its checksum or a stored body not matching its stamp.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// RefusalKind returns a short metric label for a refusal ("overwrite",
// "committed_truncate", ...), or "" when err is not a guard refusal.
func RefusalKind(err error) string {
	var ge *GuardError
	if !errors.As(err, &ge) {
		return ""
	}
	switch ge.Err {
	case ErrZeroTerm:
		return "zero_term"
	case ErrNotContiguous:
		return "not_contiguous"
	case ErrTermRegression:
		return "term_regression"
	case ErrOverwrite:
		return "overwrite"
	case ErrCommittedTruncate:
		return "committed_truncate"
	case ErrInvalidRange:
		return "invalid_range"
	case ErrPayloadMismatch:
		return "payload_mismatch"
	case ErrUnstamped:
		return "unstamped"
	case ErrCorrupt:
		return "corrupt"
	case ErrTooLarge:
		return "too_large"
	}
	return "other"
}
