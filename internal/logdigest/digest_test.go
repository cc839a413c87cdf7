package logdigest_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/logdigest"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

func itoa(n int) string { return strconv.Itoa(n) }

// sumDigests adds digests of adjacent ranges into one.
func sumDigests(ds []logdigest.Digest) logdigest.Digest {
	var s logdigest.Digest
	for i, d := range ds {
		if i == 0 {
			s.From = d.From
		}
		s.To = d.To
		s.Count += d.Count
		s.Bad += d.Bad
		s.Sum[0] += d.Sum[0]
		s.Sum[1] += d.Sum[1]
	}
	return s
}

// naiveSplit is the reference: n = to-from+1 indexes (no overflow in the
// ranges it is given), the first n%parts sub-ranges one longer.
func naiveSplit(from, to uint64, parts int) [][2]uint64 {
	n := to - from + 1
	p := min(uint64(parts), n)
	var out [][2]uint64
	lo := from
	for i := uint64(0); i < p; i++ {
		size := n / p
		if i < n%p {
			size++
		}
		out = append(out, [2]uint64{lo, lo + size - 1})
		lo += size
	}
	return out
}

// TestSplitRangeMatchesNaive: SplitRange equals the reference on random
// ranges, small and near the top of the index space.
func TestSplitRangeMatchesNaive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := 0; i < 20000; i++ {
		var from, to uint64
		switch i % 3 {
		case 0:
			from = r.Uint64N(100)
			to = from + r.Uint64N(100)
		case 1:
			from = r.Uint64N(1 << 40)
			to = from + r.Uint64N(1<<40)
		default:
			to = math.MaxUint64 - r.Uint64N(1000)
			from = to - r.Uint64N(math.MaxUint64/2)
		}
		parts := 1 + r.IntN(2000)
		got, want := logdigest.SplitRange(from, to, parts), naiveSplit(from, to, parts)
		if len(got) != len(want) {
			t.Fatalf("seed %d: SplitRange(%d, %d, %d): %d ranges, want %d", seed, from, to, parts, len(got), len(want))
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("seed %d: SplitRange(%d, %d, %d)[%d] = %v, want %v", seed, from, to, parts, k, got[k], want[k])
			}
		}
	}
	if logdigest.SplitRange(5, 4, 3) != nil || logdigest.SplitRange(1, 9, 0) != nil {
		t.Fatal("an empty range or no parts must give nil")
	}
}

// TestSplitRangeWholeIndexSpace: [0, MaxUint64] (2^64 indexes) splits into
// contiguous ranges covering it, sizes differing by at most one.
func TestSplitRangeWholeIndexSpace(t *testing.T) {
	for _, parts := range []int{1, 2, 3, 7, logdigest.MaxParts} {
		rs := logdigest.SplitRange(0, math.MaxUint64, parts)
		if len(rs) != parts || rs[0][0] != 0 || rs[len(rs)-1][1] != math.MaxUint64 {
			t.Fatalf("%d parts: %v...", parts, rs[:min(3, len(rs))])
		}
		for k := 1; k < len(rs); k++ {
			if rs[k][0] != rs[k-1][1]+1 {
				t.Fatalf("%d parts: %v then %v", parts, rs[k-1], rs[k])
			}
			a, b := rs[k-1][1]-rs[k-1][0], rs[k][1]-rs[k][0]
			if a < b || a-b > 1 {
				t.Fatalf("%d parts: sizes %d then %d", parts, a, b)
			}
		}
	}
}

// TestRangeDigestsAdditive: a range's digest is the sum of its parts', for
// every split of the fixture's range and beyond it.
func TestRangeDigestsAdditive(t *testing.T) {
	ctx := context.Background()
	s := newFixture()
	whole, err := logdigest.RangeDigests(ctx, s, 1, 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	if w := whole[0]; w.Count != 11 || w.Bad != 4 {
		t.Fatalf("whole: %+v (want 11 held, 4 bad: a lost payload and three corrupt)", w)
	}
	for parts := 1; parts <= 14; parts++ {
		ds, err := logdigest.RangeDigests(ctx, s, 1, 12, parts)
		if err != nil {
			t.Fatal(err)
		}
		if got := sumDigests(ds); !got.Equal(whole[0]) {
			t.Fatalf("%d parts: %+v, want %+v", parts, got, whole[0])
		}
	}
	beyond, err := logdigest.RangeDigests(ctx, s, 0, 1000, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := sumDigests(beyond); got.Count != whole[0].Count || got.Bad != whole[0].Bad || got.Sum != whole[0].Sum {
		t.Fatalf("[0, 1000]: %+v, want %+v", got, whole[0])
	}
}

// TestDigestSeesEveryField: changing one entry's term, type, body, stamp
// (of a lost payload) or index changes its range's digest.
func TestDigestSeesEveryField(t *testing.T) {
	ctx := context.Background()
	digest := func(s *fixtureStore) logdigest.Digest {
		t.Helper()
		ds, err := logdigest.RangeDigests(ctx, s, 1, 12, 1)
		if err != nil {
			t.Fatal(err)
		}
		return ds[0]
	}
	base := digest(newFixture())
	for name, change := range map[string]func(*fixtureStore){
		"term":        func(s *fixtureStore) { s.logs[12] = stamped(12, 5, "omega") },
		"type":        func(s *fixtureStore) { s.logs[11].Type = raft.LogCommand },
		"body":        func(s *fixtureStore) { s.logs[12] = stamped(12, 4, "omegA") },
		"length":      func(s *fixtureStore) { s.logs[12] = stamped(12, 4, "omega!") },
		"unstamped":   func(s *fixtureStore) { s.logs[9].Data = []byte("unstamped bodY") },
		"lost stamp":  func(s *fixtureStore) { s.errs[5].(*wal.GuardError).ExpectedLen = 8 },
		"lost to gap": func(s *fixtureStore) { delete(s.errs, 5) },
		"move":        func(s *fixtureStore) { s.logs[4] = s.logs[3]; delete(s.logs, 3) },
	} {
		s := newFixture()
		change(s)
		if d := digest(s); d.Equal(base) {
			t.Errorf("%s: digest unchanged %+v", name, d)
		}
	}
}

// TestReadView: the view of each kind of stored entry.
func TestReadView(t *testing.T) {
	s := newFixture()
	var l raft.Log
	var v logdigest.View
	if logdigest.ReadView(s, 4, &l, &v) || logdigest.ReadView(s, 13, &l, &v) {
		t.Fatal("a hole or an index past the end is held")
	}
	check := func(ix uint64, ok func(v logdigest.View) bool) {
		t.Helper()
		if !logdigest.ReadView(s, ix, &l, &v) || !ok(v) {
			t.Fatalf("index %d: %+v", ix, v)
		}
	}
	check(1, func(v logdigest.View) bool {
		return v.Present && v.Term == 1 && v.Len == 5 && v.CRC == segment.Checksum([]byte("alpha")) && v.Stamped && v.StampLen == 5 && v.StampCRC == v.CRC && !v.Corrupt && !v.Lost()
	})
	check(5, func(v logdigest.View) bool {
		return v.Lost() && v.Term == 2 && v.StampLen == 7 && v.StampCRC == segment.Checksum([]byte("lostbdy")) && v.Detail == ""
	})
	check(6, func(v logdigest.View) bool { return v.Corrupt && v.Term == 0 && v.Detail != "" && !v.Lost() })
	check(7, func(v logdigest.View) bool { return v.Corrupt && v.Term == 3 })
	check(8, func(v logdigest.View) bool { return v.Corrupt && v.Len == 3 && v.StampCRC != v.CRC && v.Term == 3 })
	check(10, func(v logdigest.View) bool {
		return v.Stamped && v.Len == 0 && v.StampLen == 0 && !v.Lost() && !v.Corrupt
	})
}
