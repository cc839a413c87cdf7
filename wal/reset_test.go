package wal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// The reset gate (G4, SetResetBound): hashicorp/raft v1.7.3 resets the
// whole log after installing a snapshot, even one older than what the
// member committed (docs/upstream.md U2). A gated reset that would remove
// committed entries needs a snapshot reaching the commit floor.

func TestResetGateDecision(t *testing.T) {
	log := shape{First: 5, Last: 20, LastTerm: 3, Floor: 13}
	for _, tc := range []struct {
		name     string
		s        shape
		min, max uint64
		gated    bool
		upTo     uint64
		want     deleteKind
		wantErr  error
	}{
		{name: "ungated reset below the floor (old behaviour)", s: log, min: 5, max: 20, want: deleteAll},
		{name: "gated, no snapshot sealed", s: log, min: 5, max: 20, gated: true, wantErr: ErrCommittedTruncate},
		{name: "gated, stale snapshot below the floor", s: log, min: 5, max: 20, gated: true, upTo: 8, wantErr: ErrCommittedTruncate},
		{name: "gated, snapshot one below the floor", s: log, min: 1, max: 25, gated: true, upTo: 12, wantErr: ErrCommittedTruncate},
		{name: "gated, snapshot at the floor", s: log, min: 5, max: 20, gated: true, upTo: 13, want: deleteAll},
		{name: "gated, snapshot past the log", s: log, min: 5, max: 20, gated: true, upTo: 40, want: deleteAll},
		{name: "gated, nothing committed in the log", s: shape{First: 14, Last: 20, LastTerm: 3, Floor: 13}, min: 14, max: 20, gated: true, want: deleteAll},
		{name: "gated, conflict at the first index above the floor", s: shape{First: 14, Last: 20, LastTerm: 3, Floor: 13}, min: 14, max: 20, gated: true, upTo: 2, want: deleteAll},
		{name: "gated, first index is the floor", s: shape{First: 13, Last: 20, LastTerm: 3, Floor: 13}, min: 13, max: 20, gated: true, upTo: 12, wantErr: ErrCommittedTruncate},
		{name: "gated compaction unchanged", s: log, min: 5, max: 13, gated: true, want: deletePrefix},
		{name: "gated truncation unchanged", s: log, min: 14, max: 20, gated: true, want: deleteSuffix},
		{name: "gated, empty log", s: shape{Floor: 13}, min: 1, max: 20, gated: true, want: deleteNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			kind, g := checkDeleteGated(s, tc.min, tc.max, resetGate{Gated: tc.gated, UpTo: tc.upTo})
			if tc.wantErr != nil {
				if g == nil || !errors.Is(g, tc.wantErr) {
					t.Fatalf("got %v %v, want %v", kind, g, tc.wantErr)
				}
				if g.Op != OpDelete || g.Min != tc.min || g.Max != tc.max || g.Floor != s.Floor || g.First != s.First || g.Last != s.Last {
					t.Fatalf("diagnostic %+v", g)
				}
				return
			}
			if g != nil || kind != tc.want {
				t.Fatalf("got %v %v, want %v", kind, g, tc.want)
			}
		})
	}
}

// TestResetGateDifferential checks the gated decision against the ungated
// one and a naive statement of the rule, over random shapes and ranges.
func TestResetGateDifferential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s shape
		if rapid.Bool().Draw(t, "nonEmpty") {
			s.First = rapid.Uint64Range(1, 50).Draw(t, "first")
			s.Last = s.First + rapid.Uint64Range(0, 50).Draw(t, "len")
			s.LastTerm = rapid.Uint64Range(1, 5).Draw(t, "lastTerm")
		}
		s.Floor = rapid.Uint64Range(0, 110).Draw(t, "floor")
		min := rapid.Uint64Range(0, 110).Draw(t, "min")
		max := rapid.Uint64Range(0, 110).Draw(t, "max")
		upTo := rapid.Uint64Range(0, 110).Draw(t, "upTo")

		plainKind, plainErr := checkDelete(s, min, max)
		kind, g := checkDeleteGated(s, min, max, resetGate{Gated: true, UpTo: upTo})

		removesCommitted := plainErr == nil && plainKind == deleteAll && s.First <= s.Floor
		if removesCommitted && upTo < s.Floor {
			if g == nil || !errors.Is(g, ErrCommittedTruncate) {
				t.Fatalf("%+v DeleteRange(%d,%d) bound %d: got %v %v, want a refusal", s, min, max, upTo, kind, g)
			}
			return
		}
		if kind != plainKind || (g == nil) != (plainErr == nil) || (g != nil && !errors.Is(g, plainErr.Err)) {
			t.Fatalf("%+v DeleteRange(%d,%d) bound %d: gated %v %v, ungated %v %v", s, min, max, upTo, kind, g, plainKind, plainErr)
		}
	})
}

// resetSubject is a store with the gate, as *Log and as Guard middleware.
type resetSubject struct {
	name     string
	store    raft.LogStore
	setFloor func(func() uint64)
	setBound func(func() uint64)
	refused  func() int // refusals reported through OnRefusal (-1: none wired)
}

func resetSubjects(t *testing.T) []resetSubject {
	l, err := Open(t.TempDir(), RequireStamp(), WithCacheSize(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n int
	l.opts.onRefusal = func(error) { n++ }
	g := NewGuard(raft.NewInmemStore(), GuardRequireStamp())
	return []resetSubject{
		{name: "wal", store: l, setFloor: l.SetCommitFloor, setBound: l.SetResetBound, refused: func() int { return n }},
		{name: "guard+inmem", store: g, setFloor: g.SetCommitFloor, setBound: g.SetResetBound, refused: func() int { return -1 }},
	}
}

// TestResetGateOnStores runs the U2 sequence on the stores: a member at
// commit 13 installs a snapshot at 8 and raft resets the whole log. The
// gate refuses the reset and leaves every entry; a snapshot at the floor
// lets it through.
func TestResetGateOnStores(t *testing.T) {
	for _, s := range resetSubjects(t) {
		t.Run(s.name, func(t *testing.T) {
			var batch []*raft.Log
			for i := uint64(1); i <= 15; i++ {
				batch = append(batch, stamped(i, 1+i/10, fmt.Sprintf("v%d", i)))
			}
			mustStore(t, s.store, batch...)
			floor := uint64(13)
			s.setFloor(func() uint64 { return floor })
			sealed := uint64(8) // the stale snapshot raft has just installed
			s.setBound(func() uint64 { return sealed })

			ge := guardErr(t, s.store.DeleteRange(1, 15), ErrCommittedTruncate)
			if ge.Op != OpDelete || ge.Floor != 13 || ge.First != 1 || ge.Last != 15 {
				t.Fatalf("diagnostic %+v", ge)
			}
			if s.refused() == 0 {
				t.Fatal("refusal not reported")
			}
			if first, _ := s.store.FirstIndex(); first != 1 || lastIndex(t, s.store) != 15 {
				t.Fatalf("log changed by a refused reset: [%d, %d]", first, lastIndex(t, s.store))
			}
			for i := uint64(1); i <= 15; i++ {
				var e raft.Log
				if err := s.store.GetLog(i, &e); err != nil || string(e.Data) != fmt.Sprintf("v%d", i) {
					t.Fatalf("entry %d after the refused reset: %v", i, err)
				}
			}
			// A prefix compaction below the floor is not a reset: allowed.
			if err := s.store.DeleteRange(1, 4); err != nil {
				t.Fatal(err)
			}
			// The snapshot raft installs next reaches the floor.
			sealed = 14
			if err := s.store.DeleteRange(5, 15); err != nil {
				t.Fatal(err)
			}
			if lastIndex(t, s.store) != 0 {
				t.Fatalf("reset left last index %d", lastIndex(t, s.store))
			}
			// A log holding only uncommitted entries may be reset whatever
			// the bound (a conflict at its first index).
			mustStore(t, s.store, stamped(16, 3, "u16"), stamped(17, 3, "u17"))
			floor, sealed = 15, 0
			if err := s.store.DeleteRange(16, 17); err != nil {
				t.Fatal(err)
			}
		})
	}
}
