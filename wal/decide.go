package wal

import (
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/bugs"
	"github.com/jobraft/jobraft/wal/segment"
)

// This file is the guard's pure core: decisions as functions of the log's
// shape and the operation, with no IO. The guard (guard.go) calls it, for
// Log and Guard alike, and the rapid model test checks it against a naive
// log.

// shape is what the guard knows about a log when it decides: its bounds
// (0, 0 when empty), its last term and the commit floor.
type shape = segment.Shape

// resetGate is the reset bound (SetResetBound): Gated says whole-log resets
// are gated, UpTo is then the index of the snapshot that allows one (0:
// none).
type resetGate struct {
	Gated bool
	UpTo  uint64
}

// checkStore decides whether entries may be appended (G1, G2, G3, G5).
// requireStamp refuses unstamped command entries. It does not modify
// entries. A nil result means the batch is accepted as a whole.
func checkStore(s shape, entries []*raft.Log, requireStamp bool) *GuardError {
	prevIndex, prevTerm := s.Last, s.LastTerm
	for i, e := range entries {
		fail := func(err error, detail string) *GuardError {
			g := s.Refusal(OpStore, err)
			g.Index, g.Term, g.Detail = e.Index, e.Term, detail
			return g
		}
		if e == nil {
			return fail(ErrNotContiguous, "nil entry")
		}
		if e.Index == 0 || e.Term == 0 {
			return fail(ErrZeroTerm, "")
		}
		switch {
		case i == 0 && s.Last == 0:
			// Empty log (new, or reset by snapshot install): the first entry
			// may start anywhere above the floor, never at a committed index.
			if e.Index <= s.Floor {
				return fail(ErrNotContiguous, "first entry of an empty log at or below the commit floor")
			}
		case e.Index <= prevIndex && i == 0:
			g := fail(ErrOverwrite, "index already present; truncate the suffix first")
			return g
		case e.Index != prevIndex+1:
			return fail(ErrNotContiguous, "gap or reordering")
		}
		if e.Term < prevTerm {
			g := fail(ErrTermRegression, "")
			g.StoredTerm, g.ExpectedTerm = prevTerm, e.Term
			return g
		}
		if _, ok := segment.ParseStamp(e.Extensions); ok {
			if err := segment.VerifyStamp(e); err != nil {
				g := err.(*GuardError)
				g.First, g.Last, g.LastTerm, g.Floor = s.First, s.Last, s.LastTerm, s.Floor
				return g
			}
		} else if requireStamp && e.Type == raft.LogCommand {
			return fail(ErrUnstamped, "command entry without a proposal stamp")
		}
		prevIndex, prevTerm = e.Index, e.Term
	}
	return nil
}

// deleteKind is what a DeleteRange does to the log.
type deleteKind int

const (
	deleteNone   deleteKind = iota // range outside the log: nothing to do
	deletePrefix                   // compaction: [first, max], max < last
	deleteSuffix                   // conflict truncation: [min, last], min > first
	deleteAll                      // reset: the whole log, as snapshot install does
)

func (k deleteKind) String() string {
	switch k {
	case deletePrefix:
		return "compact"
	case deleteSuffix:
		return "truncate"
	case deleteAll:
		return "reset"
	}
	return "none"
}

// checkDelete classifies DeleteRange(min, max) (inclusive) and decides it (G4):
//   - a prefix [first, max] with max < last is compaction, allowed only when
//     max <= floor;
//   - a suffix [min, last] with min > first is a conflict truncation, allowed
//     only when min > floor;
//   - the whole log [<=first, >=last] is a reset. hashicorp/raft does it after
//     installing or restoring a snapshot on a MonotonicLogStore (the state
//     machine already holds the snapshot), and compaction does it when the
//     snapshot reaches the last entry. Entries at or below the floor go as in
//     compaction, entries above it as in truncation, and the floor survives
//     it, so no committed index can be written again. When resets are gated
//     (checkDeleteGated), a reset that removes committed entries (first <=
//     floor) is allowed only if the snapshot that allows it reaches the
//     floor (UpTo >= floor): hashicorp/raft v1.7.3 also resets after
//     installing a snapshot older than what the member committed
//     (docs/upstream.md U2), which would delete committed entries the
//     snapshot does not hold;
//   - anything else would punch a hole and is refused.
func checkDelete(s shape, min, max uint64) (deleteKind, *GuardError) {
	return checkDeleteGated(s, min, max, resetGate{})
}

// checkDeleteGated is checkDelete with the reset gate r (G4, see above).
func checkDeleteGated(s shape, min, max uint64, r resetGate) (deleteKind, *GuardError) {
	fail := func(err error, detail string) *GuardError {
		g := s.Refusal(OpDelete, err)
		g.Min, g.Max, g.Detail = min, max, detail
		return g
	}
	if min > max {
		return deleteNone, fail(ErrInvalidRange, "min > max")
	}
	if s.Last == 0 || max < s.First || min > s.Last {
		return deleteNone, nil
	}
	switch {
	case min <= s.First && max >= s.Last:
		if r.Gated && s.First <= s.Floor && r.UpTo < s.Floor {
			return deleteNone, fail(ErrCommittedTruncate, fmt.Sprintf(
				"reset of committed entries: the latest snapshot (index %d) does not reach the commit floor", r.UpTo))
		}
		return deleteAll, nil
	case min <= s.First:
		if max > s.Floor {
			return deleteNone, fail(ErrCommittedTruncate, "compaction above the commit floor")
		}
		return deletePrefix, nil
	case max >= s.Last:
		if min <= s.Floor && !bugs.On("floor") {
			return deleteNone, fail(ErrCommittedTruncate, "suffix truncation at or below the commit floor")
		}
		return deleteSuffix, nil
	default:
		return deleteNone, fail(ErrInvalidRange, "hole in the middle of the log")
	}
}

// truncated returns the shape after a DeleteRange(at, s.Last) of the given
// kind: termBefore is the term of the entry at at-1 (used for a suffix
// truncation only). A reset empties the log and keeps the floor.
func truncated(s shape, kind deleteKind, at, termBefore uint64) shape {
	switch kind {
	case deleteSuffix:
		s.Last, s.LastTerm = at-1, termBefore
	case deleteAll:
		s = shape{Floor: s.Floor}
	}
	return s
}

// overwriteDiag fills the stored-versus-offered fields of an ErrOverwrite.
func overwriteDiag(g *GuardError, stored, offered *raft.Log) {
	g.StoredTerm, g.ExpectedTerm = stored.Term, offered.Term
	g.StoredLen, g.ExpectedLen = uint32(len(stored.Data)), uint32(len(offered.Data))
	g.StoredCRC, g.ExpectedCRC = segment.Checksum(stored.Data), segment.Checksum(offered.Data)
	g.TermEqual = g.StoredTerm == g.ExpectedTerm
	g.LenEqual = g.StoredLen == g.ExpectedLen
	g.CRCEqual = g.StoredCRC == g.ExpectedCRC
}
