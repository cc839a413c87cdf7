package segment_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
	bolt "go.etcd.io/bbolt"
)

// termsLog is a log in a fresh directory for the term index tests, with
// helpers that store, reopen and read every index's term.
type termsLog struct {
	t   *testing.T
	dir string
	l   *wal.Log
}

func openTermsLog(t *testing.T) *termsLog {
	tl := &termsLog{t: t, dir: t.TempDir()}
	tl.reopen()
	t.Cleanup(func() { tl.l.Close() })
	return tl
}

func (tl *termsLog) reopen() {
	tl.t.Helper()
	if tl.l != nil {
		if err := tl.l.Close(); err != nil {
			tl.t.Fatal(err)
		}
	}
	l, err := wal.Open(tl.dir, wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
	if err != nil {
		tl.t.Fatal(err)
	}
	tl.l = l
}

func (tl *termsLog) store(a, b, term uint64) {
	tl.t.Helper()
	var batch []*raft.Log
	for i := a; i <= b; i++ {
		batch = append(batch, crashEntry(i, term))
	}
	if err := tl.l.StoreLogs(batch); err != nil {
		tl.t.Fatal(err)
	}
}

func (tl *termsLog) del(a, b uint64) {
	tl.t.Helper()
	if err := tl.l.DeleteRange(a, b); err != nil {
		tl.t.Fatal(err)
	}
}

// want checks TermAt over [lo, hi] against terms (index lo first), and that
// lo-1 and hi+1 are not known.
func (tl *termsLog) want(what string, lo uint64, terms ...uint64) {
	tl.t.Helper()
	for k, w := range terms {
		if got, ok := tl.l.TermAt(lo + uint64(k)); !ok || got != w {
			tl.t.Fatalf("%s: TermAt(%d) = %d, %v; want %d", what, lo+uint64(k), got, ok, w)
		}
	}
	for _, i := range []uint64{lo - 1, lo + uint64(len(terms))} {
		if got, ok := tl.l.TermAt(i); i != 0 && ok {
			tl.t.Fatalf("%s: TermAt(%d) = %d, known; want unknown outside [%d,%d]", what, i, got, lo, lo+uint64(len(terms))-1)
		}
	}
}

func rep(term uint64, n int) []uint64 { return slices.Repeat([]uint64{term}, n) }

// The term index answers for every index of the log, compacted ones too,
// across truncation, compaction and reopening, and only there.
func TestTermIndexAcrossCompactionAndTruncation(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 40, 1)
	tl.store(41, 60, 3)
	tl.store(61, 90, 4)
	tl.want("stored", 1, slices.Concat(rep(1, 40), rep(3, 20), rep(4, 30))...)

	tl.del(1, 70) // compacts the starts of terms 1, 3 and 4
	tl.want("compacted", 1, slices.Concat(rep(1, 40), rep(3, 20), rep(4, 30))...)
	tl.reopen()
	tl.want("compacted, reopened", 1, slices.Concat(rep(1, 40), rep(3, 20), rep(4, 30))...)

	tl.del(81, 90) // a new leader cuts the suffix and writes its own
	tl.store(81, 85, 6)
	tl.want("truncated", 1, slices.Concat(rep(1, 40), rep(3, 20), rep(4, 20), rep(6, 5))...)
	tl.del(76, 85) // cuts term 6's start, which was never compacted
	tl.store(76, 77, 7)
	tl.reopen()
	tl.want("truncated twice, reopened", 1, slices.Concat(rep(1, 40), rep(3, 20), rep(4, 15), rep(7, 2))...)

	got := tl.l.TermStarts(77)
	want := []segment.TermStart{{1, 1}, {41, 3}, {61, 4}, {76, 7}}
	if got.Known != 1 || got.Through != 77 || !slices.Equal(got.Starts, want) {
		t.Fatalf("TermStarts(77) = %+v, want known 1 %v", got, want)
	}
	if got = tl.l.TermStarts(60); got.Known != 1 || !slices.Equal(got.Starts, want[:2]) {
		t.Fatalf("TermStarts(60) = %+v, want known 1 %v", got, want[:2])
	}
	if tl.l.TermStarts(78).Known != 0 {
		t.Fatal("TermStarts past the last index answered")
	}
}

// A reset clears the term index; AdoptTerms gives it the snapshot sender's,
// which answers below the snapshot (before and after the first append, and
// across reopening). A refused list changes nothing.
func TestTermIndexResetAndAdopt(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 30, 2)
	tl.del(1, 20)
	tl.del(21, 30) // raft's reset after a snapshot install at 50
	if _, ok := tl.l.TermAt(25); ok {
		t.Fatal("a reset log still answers for its old entries")
	}
	sender := []segment.TermStart{{1, 2}, {26, 5}, {45, 6}}

	for _, bad := range []struct {
		name               string
		index, term, known uint64
		starts             []segment.TermStart
	}{
		{"term at the snapshot differs", 50, 7, 1, sender},
		{"a start past the snapshot", 40, 6, 1, sender},
		{"terms not ascending", 50, 6, 1, []segment.TermStart{{1, 2}, {26, 2}, {45, 6}}},
		{"indexes not ascending", 50, 6, 1, []segment.TermStart{{1, 2}, {26, 5}, {26, 6}}},
		{"a start below known", 50, 6, 5, sender},
		{"nothing known", 50, 6, 0, sender},
		{"no starts", 50, 6, 1, nil},
		{"a zero term", 50, 6, 1, []segment.TermStart{{1, 0}, {45, 6}}},
	} {
		if err := tl.l.AdoptTerms(bad.index, bad.term, segment.TermList{Known: bad.known, Starts: bad.starts}); !errors.Is(err, wal.ErrBadTerms) {
			t.Fatalf("%s: AdoptTerms = %v, want ErrBadTerms", bad.name, err)
		}
		if _, ok := tl.l.TermAt(25); ok {
			t.Fatalf("%s: a refused list changed the term index", bad.name)
		}
	}

	if err := tl.l.AdoptTerms(50, 6, segment.TermList{Known: 1, Starts: sender}); err != nil {
		t.Fatal(err)
	}
	below := slices.Concat(rep(2, 25), rep(5, 19), rep(6, 6))
	tl.want("adopted", 1, below...)
	tl.reopen()
	tl.want("adopted, reopened empty", 1, below...)
	tl.store(51, 55, 6)
	tl.store(56, 60, 8)
	tl.reopen()
	tl.want("adopted, appended, reopened", 1, slices.Concat(below, rep(6, 5), rep(8, 5))...)
	if err := tl.l.AdoptTerms(55, 6, segment.TermList{Known: 1, Starts: sender}); !errors.Is(err, wal.ErrBadTerms) {
		t.Fatalf("AdoptTerms below the log's entries = %v, want ErrBadTerms", err)
	}
	if err := tl.l.AdoptTerms(40, 6, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 2}, {26, 5}, {35, 6}}}); !errors.Is(err, wal.ErrBadTerms) {
		t.Fatalf("AdoptTerms with a gap before the log's first entry = %v, want ErrBadTerms", err)
	}
}

// Entries stored after a reset that preceded AdoptTerms: the adopted list
// joins them (a first entry in the snapshot's term starts nothing new), and
// a log whose first entry is of a lower term than the snapshot's is
// refused.
func TestTermIndexAdoptAfterAppend(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(11, 12, 3)
	if err := tl.l.AdoptTerms(10, 4, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 4}}}); !errors.Is(err, wal.ErrBadTerms) {
		t.Fatalf("AdoptTerms with the log's first term below the snapshot's = %v, want ErrBadTerms", err)
	}
	if err := tl.l.AdoptTerms(10, 3, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 1}, {8, 3}}}); err != nil {
		t.Fatal(err)
	}
	tl.reopen()
	tl.want("adopted after appends", 1, slices.Concat(rep(1, 7), rep(3, 5))...)
	if got := tl.l.TermStarts(12); !slices.Equal(got.Starts, []segment.TermStart{{1, 1}, {8, 3}}) {
		t.Fatalf("starts %v: the log's first entry in the snapshot's term was kept as a start", got.Starts)
	}
}

// A log without a stored term index (written before it existed, or whose
// stored list was cleared by a reset that crashed before AdoptTerms) knows
// the terms of its own entries; a damaged stored list is dropped, never
// used.
func TestTermIndexWithoutOrDamagedStoredList(t *testing.T) {
	for _, damage := range []struct {
		name string
		val  []byte // nil: the key is deleted
	}{
		{"none stored", nil},
		{"checksum", func() []byte {
			b := segment.EncodeTerms(1, 0, []segment.TermStart{{1, 1}, {41, 3}})
			b[10] ^= 1
			return b
		}()},
		{"truncated", segment.EncodeTerms(1, 0, []segment.TermStart{{1, 1}, {41, 3}})[:20]},
		{"not a term index", segment.EncodeTerms(1, 0, []segment.TermStart{{1, 3}, {41, 1}})},
	} {
		t.Run(damage.name, func(t *testing.T) {
			tl := openTermsLog(t)
			tl.store(1, 40, 1)
			tl.store(41, 60, 3)
			tl.del(1, 50)
			tl.l.Close()
			db, err := bolt.Open(tl.dir+"/"+segment.StableFile, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				if damage.val == nil {
					return tx.Bucket(segment.TermsBucket).Delete(segment.TermsKey)
				}
				return tx.Bucket(segment.TermsBucket).Put(segment.TermsKey, damage.val)
			}); err != nil {
				t.Fatal(err)
			}
			db.Close()
			tl.l = nil
			tl.reopen()
			tl.want("reopened", 51, rep(3, 10)...)
			tl.store(61, 62, 4)
			tl.want("appended", 51, slices.Concat(rep(3, 10), rep(4, 2))...)
		})
	}
}

// A segment.TermList survives its encoding, answers only for [Known, Through], and
// a damaged or invalid encoding is refused.
func TestTermListEncoding(t *testing.T) {
	tl := segment.TermList{Known: 3, Through: 40, Starts: []segment.TermStart{{3, 1}, {10, 4}, {40, 6}}}
	got, err := segment.DecodeTermList(tl.Encode())
	if err != nil || got.Known != 3 || got.Through != 40 || !slices.Equal(got.Starts, tl.Starts) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, tl)
	}
	for index, want := range map[uint64]uint64{3: 1, 9: 1, 10: 4, 39: 4, 40: 6} {
		if term, ok := got.TermAt(index); !ok || term != want {
			t.Errorf("TermAt(%d) = %d %v, want %d", index, term, ok, want)
		}
	}
	for _, index := range []uint64{0, 2, 41} {
		if term, ok := got.TermAt(index); ok {
			t.Errorf("TermAt(%d) = %d, known; want unknown", index, term)
		}
	}
	if _, ok := (segment.TermList{Through: 40}).TermAt(5); ok {
		t.Error("a list that knows nothing answered")
	}
	good := tl.Encode()
	flipped := append([]byte(nil), good...)
	flipped[12] ^= 1
	for name, b := range map[string][]byte{
		"empty":                {},
		"cut":                  good[:len(good)-1],
		"checksum":             flipped,
		"a start past through": segment.TermList{Known: 1, Through: 5, Starts: []segment.TermStart{{1, 1}, {6, 2}}}.Encode(),
		"terms not ascending":  segment.TermList{Known: 1, Through: 9, Starts: []segment.TermStart{{1, 2}, {6, 2}}}.Encode(),
	} {
		if _, err := segment.DecodeTermList(b); !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// segment.DecodeTermList never panics, allocates no more than its input holds, and
// what it accepts encodes back to itself.
func FuzzDecodeTermList(f *testing.F) {
	f.Add(segment.TermList{Known: 1, Through: 9}.Encode())
	f.Add(segment.TermList{Known: 1, Through: 9, Starts: []segment.TermStart{{1, 1}, {5, 3}}}.Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := segment.DecodeTermList(b)
		if err != nil {
			return
		}
		if 16*len(tl.Starts)+25 != len(b) {
			t.Fatalf("%d starts from %d bytes", len(tl.Starts), len(b))
		}
		if string(tl.Encode()) != string(b) {
			t.Fatal("re-encoding differs")
		}
		for _, i := range []uint64{0, 1, tl.Known, tl.Through, tl.Through + 1} {
			tl.TermAt(i)
		}
	})
}
