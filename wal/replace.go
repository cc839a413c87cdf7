package wal

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// A follower replaces a conflicting suffix in two calls: DeleteRange(at,
// last), then StoreLogs(entries). hashicorp/raft v1.7.3 updates its cached
// last index only after the store succeeds, so a store refused after a
// truncation that succeeded leaves raft believing in entries the log no
// longer holds (docs/upstream.md U4). The functions here decide both steps
// ahead, with the same rules and without changing anything, so a caller in
// front of raft can refuse the pair as a whole.

// Shape is what the guard decides on: the log's first and last index (0, 0
// when empty), the term of its last entry, and the commit floor.
type Shape = segment.Shape

// AfterTruncate returns the shape of a log of shape s after the conflict
// truncation DeleteRange(at, s.Last), or the *GuardError with which the
// guard refuses that truncation (G4). termBefore is the term of the entry at
// at-1; it is read only when at-1 stays in the log. A truncation at or below
// the first index removes the whole log (a reset: empty, same floor); one
// above the last index changes nothing. It is pure.
func AfterTruncate(s Shape, at, termBefore uint64) (Shape, error) {
	kind, g := checkDelete(s, at, max(at, s.Last))
	if g != nil {
		return s, g
	}
	return truncated(s, kind, at, termBefore), nil
}

// CheckAppend decides, without IO, whether a log of shape after accepts
// StoreLogs(entries) as a whole: the guard's batch rules (G1–G3, G5; with
// requireStamp, an unstamped command is refused as RequireStamp does) and
// the record format's size limits (ErrTooLarge). It returns nil, or the
// *GuardError StoreLogs would return. It does not modify entries.
func CheckAppend(after Shape, entries []*raft.Log, requireStamp bool) error {
	if g := checkStore(after, entries, requireStamp); g != nil {
		return g
	}
	if g := segment.CheckFits(after, entries); g != nil {
		return g
	}
	return nil
}

// CheckReplace reports whether this log would accept DeleteRange(at, last)
// followed by StoreLogs(entries) — the conflict truncation and the append
// hashicorp/raft's follower does for one AppendEntries — with the options
// it was opened with (RequireStamp). It changes nothing. A refusal is
// counted and reported to OnRefusal as the refused operation would be, with
// the Detail saying it was decided ahead; errors that are not refusals
// (ErrClosed, ErrFailed, a damaged entry at at-1) are returned as they are.
//
// The log may change between the check and the operations; the caller
// must hold whatever keeps it from changing if it needs the answer to stay
// true.
func (l *Log) CheckReplace(at uint64, entries []*raft.Log) error {
	sh, err := l.w.Writable() // ErrClosed, ErrFailed
	if err != nil {
		return err
	}
	var termBefore uint64
	if at > sh.First && at <= sh.Last {
		var prev raft.Log
		if err := l.GetLog(at-1, &prev); err != nil {
			return fmt.Errorf("wal: check replace at %d: read index %d: %w", at, at-1, err)
		}
		termBefore = prev.Term
	}
	after, err := AfterTruncate(sh, at, termBefore)
	if err == nil {
		err = CheckAppend(after, entries, l.opts.requireStamp)
	}
	var g *GuardError
	if !errors.As(err, &g) {
		return err
	}
	ahead := fmt.Sprintf("decided ahead of DeleteRange(%d, %d) and StoreLogs of %d entries; nothing changed", at, max(at, sh.Last), len(entries))
	if g.Detail != "" {
		ahead = g.Detail + "; " + ahead
	}
	g.Detail = ahead
	l.refused(g)
	l.opts.logger.Warn("guard refused a truncation and append ahead", "error", g)
	return g
}
