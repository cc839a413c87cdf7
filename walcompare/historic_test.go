package walcompare

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

func compare(t *testing.T, ms []Member, opts Options) *Report {
	t.Helper()
	r, err := Compare(context.Background(), ms, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// perIndex returns the per-index divergences by index.
func perIndex(r *Report) map[uint64]Divergence {
	out := map[uint64]Divergence{}
	for _, d := range r.Divergences {
		if d.Member == "" {
			out[d.Index] = d
		}
	}
	return out
}

// runs returns the Missing/Compacted runs as "member class [a,b)".
func runs(r *Report) []Divergence {
	var out []Divergence
	for _, d := range r.Divergences {
		if d.Member != "" {
			out = append(out, Divergence{Index: d.Index, End: d.End, Class: d.Class, Member: d.Member})
		}
	}
	return out
}

func eqRuns(t *testing.T, got, want []Divergence) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("runs: got %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.End != w.End || g.Class != w.Class || g.Member != w.Member || g.Committed {
			t.Fatalf("run %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// lessons1Term gives the terms of LESSONS §1: 1–7 term 1 (ctrl-1 leading),
// 8 term 2, 9–11 term 3 (ctrl-3's entries), 12–15 term 4 (ctrl-2 leading).
func lessons1Term(ix uint64) uint64 {
	switch {
	case ix <= 7:
		return 1
	case ix == 8:
		return 2
	case ix <= 11:
		return 3
	}
	return 4
}

// lessons1 builds the three members of LESSONS §1. ctrl-2 and ctrl-3 hold
// 1–15 with 3560-byte bodies at 9–11; ctrl-1 holds the same entries but
// 9–11 with empty bodies under their stamps — the guard refuses to store
// that, so its segment is written byte by byte.
func lessons1(t *testing.T) map[string]string {
	base := t.TempDir()
	dirs := map[string]string{}
	full := history(1, 15, 200, lessons1Term)
	for ix := 9; ix <= 11; ix++ {
		full[ix-1] = entry(uint64(ix), 3, 3560)
	}
	for _, n := range []string{"ctrl-2", "ctrl-3"} {
		dirs[n] = filepath.Join(base, n)
		buildWAL(t, dirs[n], walSpec{entries: full, floor: 15})
	}
	lost := make([]*raft.Log, len(full))
	for i, e := range full {
		c := *e
		if e.Index >= 9 && e.Index <= 11 {
			c.Data = nil // the body is gone; the stamp (3560, crc) stays
		}
		lost[i] = &c
	}
	dirs["ctrl-1"] = filepath.Join(base, "ctrl-1")
	writeRaw(t, dirs["ctrl-1"], 15, lost)
	return dirs
}

// LESSONS §1: a committed index where all three members hold the entry
// (present = 3, same term and type) but one has an empty body.
func TestLessons1PayloadLostAtCommittedIndex(t *testing.T) {
	dirs := lessons1(t)
	r := compare(t, openDirs(t, dirs, "ctrl-1", "ctrl-2", "ctrl-3"), Options{})
	if r.Committed != 15 || r.CommittedBasis != "floors" {
		t.Fatalf("boundary %d (%s): %s", r.Committed, r.CommittedBasis, r.Proof)
	}
	if len(r.Divergences) != 3 || r.CommittedCount != 3 || len(r.CommittedDivergences()) != 3 {
		t.Fatalf("divergences %+v", r.Divergences)
	}
	for i, d := range r.Divergences {
		ix := uint64(9 + i)
		crc := segment.Checksum(body(ix, 3, 3560))
		if d.Index != ix || d.End != ix+1 || d.Class != PayloadLost || !d.Committed || len(d.Views) != 3 {
			t.Fatalf("divergence %d: %+v", i, d)
		}
		present := 0
		for _, v := range d.Views {
			if v.Present {
				present++
			}
			if v.Term != 3 || v.Type != raft.LogCommand {
				t.Fatalf("index %d: view %+v", ix, v)
			}
		}
		if present != 3 {
			t.Fatalf("index %d: present=%d, want 3", ix, present)
		}
		lostV, a, b := d.Views[0], d.Views[1], d.Views[2]
		if lostV.Class != PayloadLost || lostV.Len != 0 || lostV.CRC != 0 || lostV.StampLen != 3560 || lostV.StampCRC != crc || lostV.Corrupt {
			t.Fatalf("index %d: ctrl-1 view %+v", ix, lostV)
		}
		for _, v := range []View{a, b} {
			if v.Class != Same || v.Len != 3560 || v.CRC != crc {
				t.Fatalf("index %d: intact view %+v", ix, v)
			}
		}
	}
	if r.Summary[PayloadLost] != 3 || r.Summary[Same] != 12 {
		t.Fatalf("summary %v", r.Summary)
	}
}

// The same loss in a store without stamps (the historic system had none):
// present but empty where the others have a body is still PayloadLost.
func TestLessons1UnstampedEmptyBody(t *testing.T) {
	stores := make([]*raft.InmemStore, 3)
	for i := range stores {
		stores[i] = raft.NewInmemStore()
		for ix := uint64(1); ix <= 15; ix++ {
			l := &raft.Log{Index: ix, Term: lessons1Term(ix), Data: body(ix, lessons1Term(ix), 3560)}
			if i == 0 && ix >= 9 && ix <= 11 {
				l.Data = nil
			}
			if err := stores[i].StoreLog(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	ms := []Member{FromLogStore("ctrl-1", stores[0]), FromLogStore("ctrl-2", stores[1]), FromLogStore("ctrl-3", stores[2])}
	r := compare(t, ms, Options{Committed: 15})
	got := perIndex(r)
	// ctrl-1 does not hold 9–11, but ctrl-2 and ctrl-3 (a majority) hold
	// the whole prefix: the boundary is not over-claimed, and the loss is a
	// committed divergence.
	if len(got) != 3 || r.OverClaimed || r.Held != 15 || r.CommittedCount != 3 {
		t.Fatalf("held %d over %v divergences %+v", r.Held, r.OverClaimed, r.Divergences)
	}
	for ix := uint64(9); ix <= 11; ix++ {
		if d := got[ix]; d.Class != PayloadLost || !d.Committed || d.Views[0].Class != PayloadLost {
			t.Fatalf("index %d: %+v", ix, d)
		}
	}
}

// LESSONS §6: restarted members with tips 19, 15 and 11. An inflated
// boundary (19) would count their missing tails as committed divergences:
// they are Missing runs, never committed, and the boundary is flagged as
// over-claimed. With the persisted floors the boundary is proven instead.
func TestLessons6LagIsNotDivergence(t *testing.T) {
	base := t.TempDir()
	dirs := map[string]string{}
	for n, tip := range map[string]uint64{"ctrl-1": 19, "ctrl-2": 15, "ctrl-3": 11} {
		dirs[n] = filepath.Join(base, n)
		buildWAL(t, dirs[n], walSpec{entries: history(1, tip, 64, func(ix uint64) uint64 { return 1 + ix/8 }), floor: 11, batch: 3})
	}
	ms := openDirs(t, dirs, "ctrl-1", "ctrl-2", "ctrl-3")
	want := []Divergence{
		{Index: 12, End: 20, Class: Missing, Member: "ctrl-3"},
		{Index: 16, End: 20, Class: Missing, Member: "ctrl-2"},
	}

	r := compare(t, ms, Options{Committed: 19})
	eqRuns(t, runs(r), want)
	if len(r.CommittedDivergences()) != 0 || r.CommittedCount != 0 {
		t.Fatalf("lag counted as committed divergence: %+v", r.CommittedDivergences())
	}
	if r.Committed != 19 || !r.OverClaimed || r.Held != 15 {
		t.Fatalf("committed %d over-claimed %v held %d: %s", r.Committed, r.OverClaimed, r.Held, r.Proof)
	}
	if r.Summary[Missing] != 4+8 || r.Summary[Same] != 19 {
		t.Fatalf("summary %v", r.Summary)
	}

	r = compare(t, ms, Options{})
	eqRuns(t, runs(r), want)
	if r.Committed != 11 || r.CommittedBasis != "floors" || r.OverClaimed || len(r.CommittedDivergences()) != 0 {
		t.Fatalf("floors: committed %d (%s) over %v: %s", r.Committed, r.CommittedBasis, r.OverClaimed, r.Proof)
	}

	// A supplied boundary is never raised, even below the floors.
	r = compare(t, ms, Options{Committed: 5})
	if r.Committed != 5 || r.OverClaimed {
		t.Fatalf("supplied 5: committed %d over %v", r.Committed, r.OverClaimed)
	}
}

// A former leader's uncommitted tail of an old term: TermMismatch above the
// boundary, not committed; the shorter divergent tail lags one index.
func TestTermMismatchInUncommittedTail(t *testing.T) {
	base := t.TempDir()
	dirs := map[string]string{}
	newer := func(ix uint64) uint64 {
		if ix <= 10 {
			return 1
		}
		return 2
	}
	for _, n := range []string{"a", "b"} {
		dirs[n] = filepath.Join(base, n)
		buildWAL(t, dirs[n], walSpec{entries: history(1, 14, 100, newer), floor: 10})
	}
	dirs["old"] = filepath.Join(base, "old")
	buildWAL(t, dirs["old"], walSpec{entries: history(1, 13, 100, func(uint64) uint64 { return 1 }), floor: 10})
	r := compare(t, openDirs(t, dirs, "a", "old", "b"), Options{})
	got := perIndex(r)
	if len(got) != 3 || r.Committed != 10 || len(r.CommittedDivergences()) != 0 {
		t.Fatalf("committed %d divergences %+v", r.Committed, r.Divergences)
	}
	for ix := uint64(11); ix <= 13; ix++ {
		d := got[ix]
		if d.Class != TermMismatch || d.Committed || d.Views[1].Class != TermMismatch || d.Views[1].Term != 1 ||
			d.Views[0].Class != Same || d.Views[0].Term != 2 || d.Views[2].Class != Same {
			t.Fatalf("index %d: %+v", ix, d)
		}
	}
	eqRuns(t, runs(r), []Divergence{{Index: 14, End: 15, Class: Missing, Member: "old"}})
}

// Different compaction points: Compacted runs, never divergences; the
// majority test counts a compacted index as held.
func TestCompactionPoints(t *testing.T) {
	base := t.TempDir()
	dirs := map[string]string{}
	for n, c := range map[string]uint64{"a": 0, "b": 4, "c": 8} {
		dirs[n] = filepath.Join(base, n)
		// One segment per batch, so a compaction removes whole files.
		buildWAL(t, dirs[n], walSpec{entries: history(1, 12, 50, func(uint64) uint64 { return 1 }), floor: 12, batch: 2,
			compact: c, opts: []wal.Option{wal.WithSegmentSize(1)}})
	}
	r := compare(t, openDirs(t, dirs, "a", "b", "c"), Options{Committed: 12})
	eqRuns(t, runs(r), []Divergence{
		{Index: 1, End: 5, Class: Compacted, Member: "b"},
		{Index: 1, End: 9, Class: Compacted, Member: "c"},
	})
	if len(perIndex(r)) != 0 || r.OverClaimed || r.Held != 12 || r.Summary[Compacted] != 12 {
		t.Fatalf("report %+v", r)
	}
	if r.Members[1].First != 5 || r.Members[2].First != 9 {
		t.Fatalf("members %+v", r.Members)
	}
}

// corruptFixture builds three identical members and returns their dirs.
func corruptFixture(t *testing.T) map[string]string {
	base := t.TempDir()
	dirs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		dirs[n] = filepath.Join(base, n)
		buildWAL(t, dirs[n], walSpec{entries: history(1, 12, 80, func(uint64) uint64 { return 1 }), floor: 12})
	}
	return dirs
}

// recordAt returns where index ix is stored in dir (segment path, offset).
func recordAt(t *testing.T, dir string, ix uint64) (string, int64) {
	t.Helper()
	r, err := segment.ReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	var off int64
	if err := r.Scan(ix, ix, func(rec *segment.Record) bool { seg, off = rec.Segment, rec.Offset; return false }); err != nil {
		t.Fatal(err)
	}
	if seg == "" {
		t.Fatalf("index %d not found", ix)
	}
	return filepath.Join(dir, seg), off
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A bit flipped in a stored body (the record fails its stamp) and one in a
// record header (fails its CRC): Corrupt at exactly those indexes, committed,
// and the reader goes on past them.
func TestCorruptRecords(t *testing.T) {
	dirs := corruptFixture(t)
	seg, off := recordAt(t, dirs["b"], 5)
	flip(t, seg, off+48+13+7) // a payload byte (after header and stamp)
	seg, off = recordAt(t, dirs["c"], 8)
	flip(t, seg, off+17) // the term field of the record header
	r := compare(t, openDirs(t, dirs, "a", "b", "c"), Options{})
	got := perIndex(r)
	if len(got) != 2 || len(runs(r)) != 0 || r.CommittedCount != 2 {
		t.Fatalf("divergences %+v", r.Divergences)
	}
	d := got[5]
	if d.Class != Corrupt || !d.Committed || d.Views[1].Class != Corrupt || !d.Views[1].Present || d.Views[1].Term != 1 ||
		d.Views[1].Detail == "" || d.Views[0].Class != Same || d.Views[2].Class != Same {
		t.Fatalf("index 5: %+v", d)
	}
	d = got[8]
	if d.Class != Corrupt || d.Views[2].Class != Corrupt || d.Views[2].Detail == "" || d.Views[0].Class != Same {
		t.Fatalf("index 8: %+v", d)
	}
	if r.Members[2].Last != 12 || r.Members[1].Last != 12 {
		t.Fatalf("members %+v", r.Members)
	}
}

// A torn tail (the unacknowledged last write) is the end of the log, as
// wal.Open sees it: Missing, not Corrupt, and reported as torn.
func TestTornTailIsLag(t *testing.T) {
	dirs := corruptFixture(t)
	seg, off := recordAt(t, dirs["a"], 12)
	if err := os.Truncate(seg, off+20); err != nil {
		t.Fatal(err)
	}
	r := compare(t, openDirs(t, dirs, "a", "b", "c"), Options{})
	eqRuns(t, runs(r), []Divergence{{Index: 12, End: 13, Class: Missing, Member: "a"}})
	if len(perIndex(r)) != 0 || r.Members[0].Torn == "" || r.Members[0].Last != 11 {
		t.Fatalf("report %+v", r)
	}
}

// Reading never changes a data dir: every file keeps its bytes, even a
// torn tail that wal.Open would cut.
func TestOpenDirReadOnly(t *testing.T) {
	dirs := corruptFixture(t)
	seg, off := recordAt(t, dirs["a"], 12)
	if err := os.Truncate(seg, off+20); err != nil {
		t.Fatal(err)
	}
	snap := func() map[string]string {
		out := map[string]string{}
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(d, e.Name()))
				st, _ := e.Info()
				out[filepath.Join(d, e.Name())] = string(b) + st.ModTime().String()
			}
		}
		return out
	}
	before := snap()
	compare(t, openDirs(t, dirs, "a", "b", "c"), Options{})
	after := snap()
	if len(before) != len(after) {
		t.Fatalf("files changed: %d -> %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s changed", k)
		}
	}
}
