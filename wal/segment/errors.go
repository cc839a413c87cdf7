package segment

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, shared by the store and the persist guard above it
// (package wal, which re-exports each under the same name: callers use
// wal's). Every refusal of the guard and every damage the store finds is a
// *GuardError whose Err is one of these, so callers test with errors.Is and
// read the diagnostic with errors.As. "Not found" is raft.ErrLogNotFound
// itself.
var (
	// ErrZeroTerm: StoreLogs was given an entry with term 0 or index 0 (G1).
	ErrZeroTerm = errors.New("wal: entry with term 0 or index 0")
	// ErrNotContiguous: StoreLogs was given entries that do not extend the
	// log by exactly one index each (G2), or that would rewrite committed
	// history on an empty log.
	ErrNotContiguous = errors.New("wal: entries are not contiguous with the log")
	// ErrTermRegression: an entry's term is lower than its predecessor's (G2).
	ErrTermRegression = errors.New("wal: entry term lower than its predecessor's")
	// ErrOverwrite: StoreLogs would overwrite an existing index (G3); the
	// seam must truncate the conflicting suffix first.
	ErrOverwrite = errors.New("wal: entry would overwrite an existing index")
	// ErrCommittedTruncate: DeleteRange would cut a suffix at or below the
	// commit floor, or compact a prefix above it (G4).
	ErrCommittedTruncate = errors.New("wal: truncation at or below the commit floor")
	// ErrInvalidRange: DeleteRange asked for a range that is neither a
	// prefix, a suffix nor the whole log (a hole), or min > max.
	ErrInvalidRange = errors.New("wal: delete range is not a prefix, a suffix or the whole log")
	// ErrPayloadMismatch: an entry's body does not match its stamp (G5). On
	// a read this means the stored bytes rotted; such errors also match
	// ErrCorrupt.
	ErrPayloadMismatch = errors.New("wal: payload does not match its stamp")
	// ErrUnstamped: a command entry arrived without a stamp while the guard
	// requires one (RequireStamp), or a stored entry carries none.
	ErrUnstamped = errors.New("wal: entry carries no payload stamp")
	// ErrTooLarge: StoreLogs was given an entry whose record exceeds what
	// the segment format holds (1 GiB with its header and extensions), or a
	// batch whose frame body exceeds 4 GiB; written, Open could not read it
	// back.
	ErrTooLarge = errors.New("wal: entry or batch too large for the log format")
	// ErrCorrupt: stored bytes failed their own checksum or structure check
	// (G7). Open refuses a log with corruption before its torn tail.
	ErrCorrupt = errors.New("wal: corrupt log data")
	// ErrFailed: an earlier write or fsync failed; the log refuses every
	// write until it is reopened (an fsync is never retried).
	ErrFailed = errors.New("wal: log failed after a write or sync error; reopen it")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("wal: log is closed")
	// ErrKeyNotFound is returned by the stable store for a missing key. Its
	// text is "not found" because hashicorp/raft compares the text.
	ErrKeyNotFound = errors.New("not found")
)

// Op names the operation a GuardError refused.
type Op string

// Operations checked by the guard.
const (
	OpStore  Op = "StoreLogs"
	OpDelete Op = "DeleteRange"
	OpGet    Op = "GetLog"
	OpOpen   Op = "Open"
)

// GuardError is the diagnostic of a refusal. It never carries payload bytes:
// only lengths, CRCs and equality flags.
type GuardError struct {
	Op    Op
	Err   error // one of the sentinels
	Index uint64
	Term  uint64 // term of the entry offered (store) or read (get)

	// Log state when the operation was refused.
	First, Last, LastTerm, Floor uint64
	// DeleteRange bounds.
	Min, Max uint64

	// For an entry check: what is stored (or stamped) and what was offered
	// (or computed from the body).
	StoredTerm, ExpectedTerm uint64
	StoredLen, ExpectedLen   uint32
	StoredCRC, ExpectedCRC   uint32
	TermEqual, LenEqual      bool
	CRCEqual                 bool

	// Where, for errors found in files.
	Segment string
	Offset  int64

	Detail string
}

func (e *GuardError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s refused", e.Err, e.Op)
	if e.Index != 0 || e.Op != OpDelete {
		fmt.Fprintf(&b, " index=%d term=%d", e.Index, e.Term)
	}
	if e.Op == OpDelete {
		fmt.Fprintf(&b, " range=[%d,%d]", e.Min, e.Max)
	}
	fmt.Fprintf(&b, " log=[%d,%d] last_term=%d floor=%d", e.First, e.Last, e.LastTerm, e.Floor)
	if e.StoredLen != 0 || e.ExpectedLen != 0 || e.StoredCRC != 0 || e.ExpectedCRC != 0 {
		fmt.Fprintf(&b, " stored(term=%d len=%d crc=%08x) expected(term=%d len=%d crc=%08x) term_equal=%t len_equal=%t crc_equal=%t",
			e.StoredTerm, e.StoredLen, e.StoredCRC, e.ExpectedTerm, e.ExpectedLen, e.ExpectedCRC, e.TermEqual, e.LenEqual, e.CRCEqual)
	}
	if e.Segment != "" {
		fmt.Fprintf(&b, " segment=%s offset=%d", e.Segment, e.Offset)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s; %s)", e.Detail, contract(e.Err))
	} else {
		fmt.Fprintf(&b, " (%s)", contract(e.Err))
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *GuardError) Unwrap() error { return e.Err }

// Is makes a payload mismatch found on a read (rotted stored bytes) match
// ErrCorrupt as well as ErrPayloadMismatch.
func (e *GuardError) Is(target error) bool {
	return target == ErrCorrupt && (e.Op == OpGet || e.Op == OpOpen) &&
		(e.Err == ErrPayloadMismatch || e.Err == ErrUnstamped)
}

// contract names the guard contract a sentinel protects.
func contract(err error) string {
	switch err {
	case ErrZeroTerm:
		return "G1: no entry with term 0 or index 0"
	case ErrNotContiguous, ErrTermRegression:
		return "G2: appends are contiguous and terms never decrease"
	case ErrOverwrite:
		return "G3: an existing index is never overwritten without a suffix truncation"
	case ErrCommittedTruncate, ErrInvalidRange:
		return "G4: nothing at or below the commit floor is ever cut"
	case ErrPayloadMismatch, ErrUnstamped:
		return "G5: payload integrity end to end"
	case ErrCorrupt:
		return "G7: stored records verify their checksums"
	case ErrTooLarge:
		return "G7: what StoreLogs acknowledges, Open reads back"
	}
	return "guard"
}

// Shape is what the guard decides on: the log's first and last index (0, 0
// when empty), the term of its last entry, and the commit floor.
type Shape struct {
	First, Last uint64
	LastTerm    uint64
	Floor       uint64 // highest index known committed
}

// Refusal returns the diagnostic of refusing op with err (a sentinel) on a
// log of shape s.
func (s Shape) Refusal(op Op, err error) *GuardError {
	return &GuardError{Op: op, Err: err, First: s.First, Last: s.Last, LastTerm: s.LastTerm, Floor: s.Floor}
}
