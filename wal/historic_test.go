package wal

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// One test per historic failure of the controller jobraft replaces
// (docs/failures.md). Each runs over *Log and
// over the Guard in front of raft-boltdb/v2 and raft.InmemStore.

type storeUnderTest struct {
	raft.LogStore
	setFloor func(func() uint64)
	reopen   func(t *testing.T) storeUnderTest // nil: no restart possible
}

func eachStore(t *testing.T, fn func(t *testing.T, s storeUnderTest)) {
	t.Run("wal", func(t *testing.T) {
		dir := t.TempDir()
		var open func(t *testing.T) storeUnderTest
		var cur *Log
		open = func(t *testing.T) storeUnderTest {
			if cur != nil {
				cur.Close()
			}
			l, err := Open(dir, WithCacheSize(0))
			if err != nil {
				t.Fatal(err)
			}
			cur = l
			t.Cleanup(func() { l.Close() })
			return storeUnderTest{LogStore: l, setFloor: l.SetCommitFloor, reopen: open}
		}
		fn(t, open(t))
	})
	t.Run("guard+bolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bolt.db")
		var open func(t *testing.T) storeUnderTest
		var cur *raftboltdb.BoltStore
		open = func(t *testing.T) storeUnderTest {
			if cur != nil {
				cur.Close()
			}
			b, err := raftboltdb.New(raftboltdb.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			cur = b
			t.Cleanup(func() { b.Close() })
			g := NewGuard(b, GuardFloorStore(b))
			return storeUnderTest{LogStore: g, setFloor: g.SetCommitFloor, reopen: open}
		}
		fn(t, open(t))
	})
	t.Run("guard+inmem", func(t *testing.T) {
		inner := raft.NewInmemStore()
		var open func(t *testing.T) storeUnderTest
		open = func(t *testing.T) storeUnderTest {
			g := NewGuard(inner, GuardFloorStore(inner))
			return storeUnderTest{LogStore: g, setFloor: g.SetCommitFloor, reopen: open}
		}
		fn(t, open(t))
	})
}

func mustStore(t *testing.T, s raft.LogStore, entries ...*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(entries); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
}

func guardErr(t *testing.T, err, want error) *GuardError {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	var ge *GuardError
	if !errors.As(err, &ge) {
		t.Fatalf("%v is not a *GuardError", err)
	}
	return ge
}

func lastIndex(t *testing.T, s raft.LogStore) uint64 {
	t.Helper()
	v, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Lesson 1: a member catching up prior-term entries from a newer leader
// stored them with the right (term, index) and an empty body. The stamp
// says the body had 3560 bytes; the empty body is refused before it is
// durable and is not there after a restart.
func TestHistoricCrossTermCatchUpEmptyBodyRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		// Member ctrl-1 holds 1..8 of term 1.
		for i := uint64(1); i <= 8; i++ {
			mustStore(t, s, stamped(i, 1, "job-submit-term1"))
		}
		body := strings.Repeat("J", 3560)
		// The term-4 leader streams 9..11 (written in term 3 by a previous
		// leader) and 12..13 of its own term. 9..11 arrive stamped but empty.
		var batch []*raft.Log
		for i := uint64(9); i <= 13; i++ {
			term := uint64(3)
			if i >= 12 {
				term = 4
			}
			e := stamped(i, term, body)
			if term == 3 {
				e.Data = nil // the historic loss: right term and index, no body
			}
			batch = append(batch, e)
		}
		ge := guardErr(t, s.StoreLogs(batch), ErrPayloadMismatch)
		if ge.Index != 9 || ge.StoredLen != 0 || ge.ExpectedLen != 3560 || ge.LenEqual || ge.CRCEqual {
			t.Fatalf("diagnostic: %+v", ge)
		}
		if strings.Contains(ge.Error(), "JJJ") {
			t.Fatal("diagnostic contains payload bytes")
		}
		if !strings.Contains(ge.Error(), "payload lost") || !strings.Contains(ge.Error(), "G5") {
			t.Fatalf("message does not name the contract: %s", ge)
		}
		if got := lastIndex(t, s); got != 8 {
			t.Fatalf("refused batch changed the log: last %d", got)
		}
		// Nothing of it is durable.
		s = s.reopen(t)
		if got := lastIndex(t, s); got != 8 {
			t.Fatalf("after restart last %d, want 8", got)
		}
		// The same entries with their bodies are accepted.
		for _, e := range batch {
			e.Data = []byte(body)
		}
		mustStore(t, s, batch...)
		var e raft.Log
		if err := s.GetLog(10, &e); err != nil || len(e.Data) != 3560 || e.Term != 3 {
			t.Fatalf("get 10: %v len %d term %d", err, len(e.Data), e.Term)
		}
	})
}

// Lesson 2: an index-only "already have it" guard kept a wrong entry
// forever. A re-store of an existing index is refused whatever it carries —
// a different term, a different payload, even the same bytes — and the
// stored entry is unchanged; replacing it takes a suffix truncation first.
func TestHistoricNoIndexOnlyAlreadyHaveIt(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		for i := uint64(1); i <= 5; i++ {
			mustStore(t, s, stamped(i, 2, "original"))
		}
		ge := guardErr(t, s.StoreLogs([]*raft.Log{stamped(4, 3, "original")}), ErrOverwrite)
		if ge.TermEqual || !ge.CRCEqual || ge.StoredTerm != 2 || ge.ExpectedTerm != 3 {
			t.Fatalf("different term: %+v", ge)
		}
		ge = guardErr(t, s.StoreLogs([]*raft.Log{stamped(4, 2, "rewritten")}), ErrOverwrite)
		if !ge.TermEqual || ge.CRCEqual {
			t.Fatalf("different payload: %+v", ge)
		}
		ge = guardErr(t, s.StoreLogs([]*raft.Log{stamped(5, 2, "original")}), ErrOverwrite)
		if !ge.TermEqual || !ge.CRCEqual || !ge.LenEqual {
			t.Fatalf("identical entry: %+v", ge)
		}
		var e raft.Log
		if err := s.GetLog(4, &e); err != nil || e.Term != 2 || string(e.Data) != "original" {
			t.Fatalf("stored entry changed: %v term %d", err, e.Term)
		}
		// The seam's repair: truncate the suffix, then store.
		if err := s.DeleteRange(4, 5); err != nil {
			t.Fatal(err)
		}
		mustStore(t, s, stamped(4, 3, "repaired"))
		if err := s.GetLog(4, &e); err != nil || e.Term != 3 || string(e.Data) != "repaired" {
			t.Fatalf("after repair: %v term %d", err, e.Term)
		}
	})
}

// Lesson 3, first contract: a follower must cut a conflicting suffix even
// though it is durable locally, because it was never committed.
func TestHistoricFollowerConflictTruncationAllowed(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		for i := uint64(1); i <= 15; i++ {
			term := uint64(1)
			if i > 11 {
				term = 2 // a former leader's divergent, uncommitted tail
			}
			mustStore(t, s, stamped(i, term, "x"))
		}
		s.setFloor(func() uint64 { return 11 })
		if err := s.DeleteRange(12, 15); err != nil {
			t.Fatalf("conflict truncation above the floor refused: %v", err)
		}
		mustStore(t, s, stamped(12, 5, "new leader"), stamped(13, 5, "new leader"))
		s = s.reopen(t)
		if got := lastIndex(t, s); got != 13 {
			t.Fatalf("last %d, want 13", got)
		}
		var e raft.Log
		if err := s.GetLog(12, &e); err != nil || e.Term != 5 {
			t.Fatalf("get 12: %v term %d", err, e.Term)
		}
	})
}

// Lesson 3, second contract: nothing may ever cut at or below the commit
// index — also after a restart, before raft has told the store anything.
func TestHistoricTruncationAtOrBelowFloorRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		for i := uint64(1); i <= 10; i++ {
			mustStore(t, s, stamped(i, 1, "x"))
		}
		s.setFloor(func() uint64 { return 7 })
		mustStore(t, s, stamped(11, 1, "x")) // persists floor 7 with the batch
		for _, min := range []uint64{7, 5, 2} {
			ge := guardErr(t, s.DeleteRange(min, 11), ErrCommittedTruncate)
			if ge.Floor != 7 || ge.Min != min {
				t.Fatalf("diagnostic: %+v", ge)
			}
		}
		s = s.reopen(t) // raft has learned nothing yet: no floor source bound
		guardErr(t, s.DeleteRange(7, 11), ErrCommittedTruncate)
		guardErr(t, s.DeleteRange(3, 11), ErrCommittedTruncate)
		if got := lastIndex(t, s); got != 11 {
			t.Fatalf("refused truncation changed the log: last %d", got)
		}
		if err := s.DeleteRange(8, 11); err != nil {
			t.Fatalf("truncation above the persisted floor refused: %v", err)
		}
	})
}

// Prefix compaction is allowed up to the floor and refused above it.
func TestHistoricCompactionBelowFloorAllowed(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		for i := uint64(1); i <= 20; i++ {
			mustStore(t, s, stamped(i, 1, "x"))
		}
		s.setFloor(func() uint64 { return 12 })
		guardErr(t, s.DeleteRange(1, 13), ErrCommittedTruncate)
		if err := s.DeleteRange(1, 12); err != nil {
			t.Fatalf("compaction up to the floor refused: %v", err)
		}
		first, _ := s.FirstIndex()
		if first != 13 || lastIndex(t, s) != 20 {
			t.Fatalf("log [%d,%d], want [13,20]", first, lastIndex(t, s))
		}
		guardErr(t, s.DeleteRange(15, 16), ErrInvalidRange) // a hole
	})
}

// A term-0 entry is refused; so is a term regression along the log.
func TestGuardRefusesZeroTermAndRegression(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		guardErr(t, s.StoreLogs([]*raft.Log{stamped(1, 0, "x")}), ErrZeroTerm)
		mustStore(t, s, stamped(1, 3, "x"))
		guardErr(t, s.StoreLogs([]*raft.Log{stamped(2, 2, "x")}), ErrTermRegression)
		guardErr(t, s.StoreLogs([]*raft.Log{stamped(3, 3, "x")}), ErrNotContiguous)
		if got := lastIndex(t, s); got != 1 {
			t.Fatalf("last %d", got)
		}
	})
}
