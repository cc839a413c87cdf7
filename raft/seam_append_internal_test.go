package raft

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

// conflictAt finds where hashicorp/raft's follower would truncate, and
// nothing where it would not: a previous entry that does not match, entries
// all stored or all new, a lookup that fails.
func TestConflictAtMirrorsRaftsWalk(t *testing.T) {
	store := hraft.NewInmemStore()
	// Log 3..7 (1 and 2 compacted), terms 1 1 2 2 2.
	for i, term := range []uint64{1, 1, 2, 2, 2} {
		if err := store.StoreLog(&hraft.Log{Index: uint64(i + 3), Term: term}); err != nil {
			t.Fatal(err)
		}
	}
	ents := func(first uint64, terms ...uint64) []*hraft.Log {
		var out []*hraft.Log
		for i, term := range terms {
			out = append(out, &hraft.Log{Index: first + uint64(i), Term: term})
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		prev, prevTerm uint64
		entries        []*hraft.Log
		at             int
		ok             bool
	}{
		{"conflict at the first entry", 4, 1, ents(5, 3, 3), 0, true},
		{"duplicates, then a conflict", 4, 1, ents(5, 2, 2, 3), 2, true},
		{"conflict at the last index", 6, 2, ents(7, 3), 0, true},
		{"conflict right after the first index", 3, 1, ents(4, 3), 0, true},
		{"previous entry compacted just below the first index", 2, 1, ents(3, 3), 0, false},
		{"previous term differs: raft refuses as is", 4, 9, ents(5, 3), 0, false},
		{"previous entry compacted: raft's lookup fails", 1, 1, ents(2, 1, 1, 3), 0, false},
		{"previous entry past the log", 8, 2, ents(9, 3), 0, false},
		{"all duplicates", 4, 1, ents(5, 2, 2, 2), 0, false},
		{"duplicates, then new entries", 5, 2, ents(6, 2, 2, 3, 3), 0, false},
		{"prev 0 from the start of the log: compacted entry", 0, 0, ents(1, 3), 0, false},
		{"a nil entry is left to raft", 4, 1, []*hraft.Log{nil}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &hraft.AppendEntriesRequest{PrevLogEntry: tc.prev, PrevLogTerm: tc.prevTerm, Entries: tc.entries}
			at, ok := conflictAt(store, a)
			if at != tc.at || ok != tc.ok {
				t.Fatalf("conflictAt = %d, %v; want %d, %v", at, ok, tc.at, tc.ok)
			}
		})
	}
}
