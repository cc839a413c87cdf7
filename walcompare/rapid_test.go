package walcompare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// deviation kinds injected into one member at one index.
const (
	devNone = iota
	devRewrite
	devLost
	devMismatch
	devCorrupt
)

var devClass = map[int]Class{devRewrite: TermMismatch, devLost: PayloadLost, devMismatch: PayloadMismatch, devCorrupt: Corrupt}

type world struct {
	terms       []uint64 // terms[i-1] is the history's term at index i
	first, tip  []uint64
	floor       []uint64
	dev         []map[uint64]int // member -> index -> kind
	supplied    uint64
	batch       []int
	memberNames []string
}

// genWorld draws one random history and, per member, a lag, a compaction
// point and deviations at known places. A member deviates at an index only
// where every other member holds the history's entry, so the reference (a
// majority) is the history and the ground truth is known without
// classifying.
func genWorld(t *rapid.T) *world {
	n := rapid.IntRange(3, 4).Draw(t, "members")
	l := rapid.Uint64Range(1, 40).Draw(t, "len")
	w := &world{}
	term := uint64(1)
	for i := uint64(0); i < l; i++ {
		if rapid.IntRange(0, 5).Draw(t, "bump") == 0 {
			term += rapid.Uint64Range(1, 2).Draw(t, "step")
		}
		w.terms = append(w.terms, term)
	}
	for m := 0; m < n; m++ {
		w.memberNames = append(w.memberNames, fmt.Sprintf("m%d", m))
		tip := rapid.Uint64Range(1, l).Draw(t, "tip")
		w.tip = append(w.tip, tip)
		w.first = append(w.first, rapid.Uint64Range(1, tip).Draw(t, "first"))
		w.floor = append(w.floor, rapid.Uint64Range(0, tip).Draw(t, "floor"))
		w.batch = append(w.batch, rapid.IntRange(1, 4).Draw(t, "batch"))
		w.dev = append(w.dev, map[uint64]int{})
	}
	free := func(m int, ix uint64) bool {
		for o := 0; o < n; o++ {
			if o == m {
				continue
			}
			if ix < w.first[o] || ix > w.tip[o] || w.dev[o][ix] != devNone {
				return false
			}
		}
		return ix >= w.first[m] && ix <= w.tip[m] && w.dev[m][ix] == devNone
	}
	for m := 0; m < n; m++ {
		if rapid.Bool().Draw(t, "rewrite") {
			k := rapid.Uint64Range(w.first[m], w.tip[m]).Draw(t, "rewriteFrom")
			ok := true
			for ix := k; ix <= w.tip[m]; ix++ {
				ok = ok && free(m, ix)
			}
			if ok {
				for ix := k; ix <= w.tip[m]; ix++ {
					w.dev[m][ix] = devRewrite
				}
			}
		}
		for j := rapid.IntRange(0, 3).Draw(t, "faults"); j > 0; j-- {
			ix := rapid.Uint64Range(w.first[m], w.tip[m]).Draw(t, "at")
			kind := rapid.IntRange(devLost, devCorrupt).Draw(t, "kind")
			if free(m, ix) {
				w.dev[m][ix] = kind
			}
		}
	}
	if rapid.Bool().Draw(t, "supply") {
		w.supplied = rapid.Uint64Range(1, l+2).Draw(t, "committed")
	}
	return w
}

// entries returns member m's log as stored, deviations applied.
func (w *world) entries(m int) []*raft.Log {
	var out []*raft.Log
	for ix := w.first[m]; ix <= w.tip[m]; ix++ {
		term := w.terms[ix-1]
		size := int(ix%7)*13 + 1
		var e *raft.Log
		switch w.dev[m][ix] {
		case devRewrite:
			e = entry(ix, term+1000, size)
		case devMismatch:
			e = entry(ix, term, size+1)
		case devLost:
			e = entry(ix, term, size)
			e.Data = nil
		case devCorrupt:
			e = entry(ix, term, size)
			e.Data = append([]byte(nil), e.Data...)
			e.Data[0] ^= 1
		default:
			e = entry(ix, term, size)
		}
		out = append(out, e)
	}
	return out
}

// want derives the expected report from the world alone.
func (w *world) want(boundary uint64) (per map[uint64][]Class, rs []Divergence, held uint64) {
	n := len(w.tip)
	lo, hi := w.first[0], w.tip[0]
	for m := 0; m < n; m++ {
		lo, hi = min(lo, w.first[m]), max(hi, w.tip[m])
	}
	per = map[uint64][]Class{}
	firstBad := make([]uint64, n)
	for m := 0; m < n; m++ {
		for ix, kind := range w.dev[m] {
			if per[ix] == nil {
				per[ix] = make([]Class, n)
				for o := 0; o < n; o++ {
					switch {
					case ix < w.first[o]:
						per[ix][o] = Compacted
					case ix > w.tip[o]:
						per[ix][o] = Missing
					default:
						per[ix][o] = Same
					}
				}
			}
			per[ix][m] = devClass[kind]
			if firstBad[m] == 0 || ix < firstBad[m] {
				firstBad[m] = ix
			}
		}
		if w.first[m] > lo {
			rs = append(rs, Divergence{Index: lo, End: w.first[m], Class: Compacted, Member: w.memberNames[m]})
		}
		if w.tip[m] < hi {
			rs = append(rs, Divergence{Index: w.tip[m] + 1, End: hi + 1, Class: Missing, Member: w.memberNames[m]})
			if firstBad[m] == 0 || w.tip[m]+1 < firstBad[m] {
				firstBad[m] = w.tip[m] + 1
			}
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Index < rs[j].Index })
	hs := make([]uint64, n)
	for m := range hs {
		hs[m] = hi
		if firstBad[m] != 0 {
			hs[m] = firstBad[m] - 1
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] > hs[j] })
	return per, rs, hs[n/2]
}

// check compares r with the ground truth. floors says whether the members
// carry their floors (segment files) or none (in-memory stores): a rewrite
// above its member's own floor is an uncommitted tail, not committed.
func (w *world) check(t *rapid.T, r *Report, boundary uint64, supplied, floors bool) {
	per, rs, held := w.want(boundary)
	if r.Committed != boundary || r.Held != held || r.OverClaimed != (supplied && boundary > held) {
		t.Fatalf("committed %d (want %d) held %d (want %d) over %v: %s", r.Committed, boundary, r.Held, held, r.OverClaimed, r.Proof)
	}
	lo, hi := w.first[0], w.tip[0]
	for m := range w.tip {
		lo, hi = min(lo, w.first[m]), max(hi, w.tip[m])
	}
	if r.From != lo || r.End != hi+1 || r.To != hi || r.Summary[Same] != hi+1-lo-uint64(len(per)) {
		t.Fatalf("compared [%d, %d) (to %d) same %d, want [%d, %d) same %d", r.From, r.End, r.To, r.Summary[Same], lo, hi+1, hi+1-lo-uint64(len(per)))
	}
	got := perIndex(r)
	if len(got) != len(per) {
		t.Fatalf("%d per-index divergences, want %d: %+v want %v", len(got), len(per), r.Divergences, per)
	}
	committed := 0
	for ix, classes := range per {
		d, ok := got[ix]
		if !ok {
			t.Fatalf("index %d not reported (want %v)", ix, classes)
		}
		worst := Same
		for m, c := range classes {
			if d.Views[m].Class != c {
				t.Fatalf("index %d member %d: %s, want %s (%+v)", ix, m, d.Views[m].Class, c, d)
			}
			if c.severity() > worst.severity() && !c.lag() {
				worst = c
			}
		}
		tail := false
		for m := range classes {
			if w.dev[m][ix] == devRewrite && floors && w.floor[m] < ix {
				tail = true
			}
		}
		wantCommitted := ix <= boundary && !tail
		if d.Class != worst || d.Committed != wantCommitted || d.Tail != (ix <= boundary && tail) {
			t.Fatalf("index %d: class %s committed %v tail %v, want %s %v", ix, d.Class, d.Committed, d.Tail, worst, wantCommitted)
		}
		if d.Committed {
			committed++
		}
	}
	gotRuns := runs(r)
	sort.SliceStable(gotRuns, func(i, j int) bool { return gotRuns[i].Index < gotRuns[j].Index })
	if len(gotRuns) != len(rs) {
		t.Fatalf("runs %+v, want %+v", gotRuns, rs)
	}
	for i := range rs {
		g, x := gotRuns[i], rs[i]
		if g.Index != x.Index || g.End != x.End || g.Class != x.Class || g.Member != x.Member {
			t.Fatalf("runs %+v, want %+v", gotRuns, rs)
		}
	}
	if r.CommittedCount != committed {
		t.Fatalf("committed count %d, want %d", r.CommittedCount, committed)
	}
	for i := 1; i < len(r.Divergences); i++ {
		if r.Divergences[i].Index < r.Divergences[i-1].Index {
			t.Fatalf("divergences not ascending at %d", i)
		}
	}
}

// TestRapidGroundTruth: members derived from one random history, with tail
// rewrites, lags, compactions, lost payloads, payload mismatches and
// corrupt records at known places. The report equals the ground truth,
// both through FromLogStore (in-memory stores, supplied boundary) and
// through OpenDir over segment files (floors persisted in them). rapid
// prints the seed of a failure; -rapid.seed replays it.
func TestRapidGroundTruth(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		n := len(w.tip)
		var ms []Member
		for m := 0; m < n; m++ {
			s := raft.NewInmemStore()
			if err := s.StoreLogs(w.entries(m)); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, FromLogStore(w.memberNames[m], s))
		}
		r, err := Compare(context.Background(), ms, Options{Committed: w.supplied})
		if err != nil {
			t.Fatal(err)
		}
		w.check(t, r, w.supplied, w.supplied > 0, false)

		dir, err := os.MkdirTemp("", "walcompare-rapid")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		ms = ms[:0]
		var maxFloor uint64
		for m := 0; m < n; m++ {
			es := w.entries(m)
			var frames [][]*raft.Log
			for i := 0; i < len(es); i += w.batch[m] {
				frames = append(frames, es[i:min(len(es), i+w.batch[m])])
			}
			// A frame after the last batch (as a floor mark written by
			// Close would be), so that a deviation in the last batch is
			// damage inside the log and not a torn tail, which Open
			// would cut and the Reader reports as such (wal's
			// TestOpenAndReaderAgreeOnDamagedSegments).
			frames = append(frames, nil)
			d := filepath.Join(dir, w.memberNames[m])
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "00000000000000000001.seg"), rawSegment(1, w.first[m], w.floor[m], frames), 0o600); err != nil {
				t.Fatal(err)
			}
			mem, err := OpenDir(w.memberNames[m], d)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, mem)
			maxFloor = max(maxFloor, w.floor[m])
		}
		r, err = Compare(context.Background(), ms, Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.check(t, r, maxFloor, false, true)
	})
}
