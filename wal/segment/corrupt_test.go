package segment_test

// Corruption tests: a damaged byte inside the log makes Open refuse with
// ErrCorrupt and a diagnostic that names the segment and offset; damage in
// the unacknowledged tail (the last batch of the last segment, with nothing
// valid after it) is cut; Repair cuts at the first damage and says what it
// cut; rot found on a read is refused without payload bytes in the error.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

const (
	corSegSize = 4 << 10
	// corN entries in batches of 5 fill six segments, the last with three
	// frames.
	corN = 110
)

// corPayload is recognisable text, so a test can assert it never appears in
// an error message.
func corPayload(i uint64) []byte {
	return []byte(fmt.Sprintf("SECRET-PAYLOAD-%06d-", i) + strings.Repeat("x", 150+int(i%50)))
}

// stamped is a stamped command entry (index i, term t) with body data.
func stamped(i, t uint64, data string) *raft.Log {
	e := &raft.Log{Index: i, Term: t, Type: raft.LogCommand, Data: []byte(data)}
	segment.Stamp(e)
	return e
}

// corWrite writes entries 1..n in batches of 5 (term 1 + i/40) to a new log
// in dir with 4 KiB segments, and closes it.
func corWrite(t *testing.T, dir string, n uint64) {
	t.Helper()
	l, err := wal.Open(dir, wal.WithSegmentSize(corSegSize))
	if err != nil {
		t.Fatal(err)
	}
	for a := uint64(1); a <= n; a += 5 {
		var batch []*raft.Log
		for i := a; i < a+5 && i <= n; i++ {
			e := &raft.Log{Index: i, Term: 1 + i/40, Type: raft.LogCommand, Data: corPayload(i)}
			segment.Stamp(e)
			batch = append(batch, e)
		}
		if err := l.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// corCheck asserts l holds exactly entries [first, last] as corWrite wrote.
func corCheck(t *testing.T, l *wal.Log, first, last uint64) {
	t.Helper()
	f, _ := l.FirstIndex()
	n, _ := l.LastIndex()
	if f != first || n != last {
		t.Fatalf("log [%d,%d], want [%d,%d]", f, n, first, last)
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if e.Index != i || e.Term != 1+i/40 || string(e.Data) != string(corPayload(i)) {
			t.Fatalf("entry %d: index %d term %d len %d", i, e.Index, e.Term, len(e.Data))
		}
	}
	var e raft.Log
	if err := l.GetLog(last+1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("get %d: %v, want ErrLogNotFound", last+1, err)
	}
}

// corSeg is one scanned segment file of a test log.
type corSeg struct {
	name, path string
	sc         *segment.Scanned
}

func corSegs(t *testing.T, dir string) []corSeg {
	t.Helper()
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []corSeg
	for _, n := range names {
		p := filepath.Join(dir, n)
		sc, err := segment.ScanSegment(wal.OSFS{}, p)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Bad != nil {
			t.Fatalf("%s damaged before the test: %+v", n, sc.Bad)
		}
		// Cases count frames of entries: leave out the first-index mark
		// that starts every segment after the first.
		var frames []segment.ScanFrame
		for _, fr := range sc.Frames {
			if fr.FirstMark == 0 {
				frames = append(frames, fr)
			}
		}
		sc.Frames = frames
		out = append(out, corSeg{name: n, path: p, sc: sc})
	}
	if len(out) < 4 {
		t.Fatalf("want several segments, got %d", len(out))
	}
	return out
}

// flip inverts the bits of the byte at off in path.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestOpenRefusesDamageInsideTheLog(t *testing.T) {
	const n = corN
	// Each case damages one byte and says which frame (segment, frame
	// number) holds it; the diagnostic must point at that frame (or at
	// offset 0 for a segment header).
	type spot struct {
		seg, frame int // frame -1: the segment header
		off        func(s corSeg) int64
	}
	rec := func(s corSeg, frame, k int) segment.ScanRec { return s.sc.Recs[s.sc.Frames[frame].First+k] }
	cases := []struct {
		name string
		at   func(segs []corSeg) spot
	}{
		{"record data in a non-last segment", func(segs []corSeg) spot {
			return spot{1, 0, func(s corSeg) int64 {
				r := rec(s, 0, 1)
				return r.Off + segment.RecHeaderSize + int64(r.Info.ExtLen) + 3
			}}
		}},
		{"record data in a non-last frame of the last segment", func(segs []corSeg) spot {
			last := len(segs) - 1

			return spot{last, 0, func(s corSeg) int64 {
				r := rec(s, 0, 2)
				return r.Off + int64(r.Len) - 1
			}}
		}},
		{"record header (index)", func(segs []corSeg) spot {
			return spot{2, 1, func(s corSeg) int64 { return rec(s, 1, 3).Off + 8 }}
		}},
		{"record header (extensions: the stamp)", func(segs []corSeg) spot {
			return spot{2, 0, func(s corSeg) int64 { return rec(s, 0, 0).Off + segment.RecHeaderSize + 2 }}
		}},
		{"frame header (count)", func(segs []corSeg) spot {
			return spot{1, 1, func(s corSeg) int64 { return s.sc.Frames[1].Off + 12 }}
		}},
		{"frame header (magic)", func(segs []corSeg) spot {
			return spot{0, 0, func(s corSeg) int64 { return s.sc.Frames[0].Off }}
		}},
		{"segment header of a non-last segment", func(segs []corSeg) spot {
			return spot{1, -1, func(s corSeg) int64 { return 20 }}
		}},
		{"segment header magic of the first segment", func(segs []corSeg) spot {
			return spot{0, -1, func(s corSeg) int64 { return 0 }}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			corWrite(t, dir, n)
			segs := corSegs(t, dir)
			sp := tc.at(segs)
			s := segs[sp.seg]
			off := sp.off(s)
			flip(t, s.path, off)
			before := fileSize(t, s.path)

			l, err := wal.Open(dir)
			if err == nil {
				l.Close()
				t.Fatalf("Open accepted a log with a flipped byte at %s+%d", s.name, off)
			}
			if !errors.Is(err, wal.ErrCorrupt) || !wal.IsCorrupt(err) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			var ge *wal.GuardError
			if !errors.As(err, &ge) {
				t.Fatalf("Open: %T %v, want a *GuardError", err, err)
			}
			if ge.Op != wal.OpOpen || ge.Segment != s.name {
				t.Fatalf("diagnostic op %s segment %q, want Open in %s: %v", ge.Op, ge.Segment, s.name, err)
			}
			wantOff, wantIndex := int64(0), uint64(0)
			if sp.frame >= 0 {
				fr := s.sc.Frames[sp.frame]
				wantOff, wantIndex = fr.Off, s.sc.Recs[fr.First].Info.Index
				if off < fr.Off || off >= fr.End {
					t.Fatalf("test bug: flipped %d outside frame [%d,%d)", off, fr.Off, fr.End)
				}
			} else if len(s.sc.Recs) > 0 {
				wantIndex = s.sc.Recs[0].Info.Index
			}
			if ge.Offset != wantOff {
				t.Fatalf("diagnostic offset %d, want %d (damage at %d): %v", ge.Offset, wantOff, off, err)
			}
			if wantIndex != 0 && ge.Index != wantIndex {
				t.Fatalf("diagnostic index %d, want %d (first index of the damaged frame): %v", ge.Index, wantIndex, err)
			}
			if strings.Contains(err.Error(), "SECRET-PAYLOAD") {
				t.Fatalf("diagnostic carries payload bytes: %v", err)
			}
			if got := fileSize(t, s.path); got != before {
				t.Fatalf("refused Open changed %s: %d bytes, was %d", s.name, got, before)
			}
			if got := len(corSegsRaw(t, dir)); got != len(segs) {
				t.Fatalf("refused Open removed segment files: %d, was %d", got, len(segs))
			}
		})
	}
}

// corSegsRaw lists segment file names without scanning them.
func corSegsRaw(t *testing.T, dir string) []string {
	t.Helper()
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestOpenCutsTornTail(t *testing.T) {
	const n = corN
	lastFrame := func(segs []corSeg) (corSeg, segment.ScanFrame) {
		s := segs[len(segs)-1]
		return s, s.sc.Frames[len(s.sc.Frames)-1]
	}
	cases := []struct {
		name string
		// damage returns the expected last index after Open and the
		// expected size of the last segment file (-1: file removed).
		damage func(t *testing.T, dir string, segs []corSeg) (uint64, int64)
	}{
		{"flipped byte in the last batch", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s, fr := lastFrame(segs)
			r := s.sc.Recs[fr.First+fr.Cnt-1]
			flip(t, s.path, r.Off+int64(r.Len)-5)
			return s.sc.Recs[fr.First].Info.Index - 1, fr.Off
		}},
		{"flipped frame header of the last batch", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s, fr := lastFrame(segs)
			flip(t, s.path, fr.Off+24)
			return s.sc.Recs[fr.First].Info.Index - 1, fr.Off
		}},
		{"last segment cut mid-batch", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s, fr := lastFrame(segs)
			if err := os.Truncate(s.path, fr.Off+(fr.End-fr.Off)/2); err != nil {
				t.Fatal(err)
			}
			return s.sc.Recs[fr.First].Info.Index - 1, fr.Off
		}},
		{"last segment cut inside the frame header", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s, fr := lastFrame(segs)
			if err := os.Truncate(s.path, fr.Off+7); err != nil {
				t.Fatal(err)
			}
			return s.sc.Recs[fr.First].Info.Index - 1, fr.Off
		}},
		{"garbage after the last frame", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			// Cut where the frames end (any preallocated zeros before the
			// garbage go with it).
			s := segs[len(segs)-1]
			appendFile(t, s.path, []byte("\x13\x37garbage that is not a frame JRB1 nor anything else"))
			return n, s.sc.End
		}},
		{"zero-filled tail (preallocation) is kept, not cut", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s := segs[len(segs)-1]
			appendFile(t, s.path, make([]byte, 64<<10))
			return n, s.sc.Size + 64<<10
		}},
		{"zero-filled tail after a cut batch", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			s, fr := lastFrame(segs)
			if err := os.Truncate(s.path, fr.End-9); err != nil {
				t.Fatal(err)
			}
			appendFile(t, s.path, make([]byte, 4096))
			return s.sc.Recs[fr.First].Info.Index - 1, fr.Off
		}},
		{"torn segment creation: partial header", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			seq := segs[len(segs)-1].sc.Hdr.Seq + 1
			hdr := segment.SegHeader{Version: segment.FormatVersion, Seq: seq, Base: n + 1}.Encode()
			if err := os.WriteFile(filepath.Join(dir, segment.SegName(seq)), hdr[:segment.SegHeaderSize-1], 0o600); err != nil {
				t.Fatal(err)
			}
			return n, -1
		}},
		{"torn segment creation: zero-filled header", func(t *testing.T, dir string, segs []corSeg) (uint64, int64) {
			// A power loss after the creation, before the header's fsync,
			// can leave the file's size with zeros in it. Nothing after the
			// header was ever written, so nothing acknowledged is in it.
			seq := segs[len(segs)-1].sc.Hdr.Seq + 1
			if err := os.WriteFile(filepath.Join(dir, segment.SegName(seq)), make([]byte, 4096), 0o600); err != nil {
				t.Fatal(err)
			}
			return n, -1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			corWrite(t, dir, n)
			segs := corSegs(t, dir)
			wantLast, wantSize := tc.damage(t, dir, segs)
			names := corSegsRaw(t, dir)
			lastPath := filepath.Join(dir, names[len(names)-1])

			l, err := wal.Open(dir, wal.WithCacheSize(0))
			if err != nil {
				t.Fatalf("Open of a log with a torn tail: %v", err)
			}
			if rep := l.Repaired(); rep != nil {
				t.Fatalf("torn tail reported as a repair: %+v", rep)
			}
			corCheck(t, l, 1, wantLast)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if wantSize < 0 {
				if _, err := os.Stat(lastPath); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("torn segment %s not removed: %v", lastPath, err)
				}
			} else if got := fileSize(t, lastPath); got != wantSize {
				t.Fatalf("last segment %d bytes after Open, want %d (cut at the torn frame)", got, wantSize)
			}

			// Nothing left to cut: a second Open changes nothing, and the
			// log continues right after the cut.
			before, err := crashSegDigest(dir)
			if err != nil {
				t.Fatal(err)
			}
			l, err = wal.Open(dir, wal.WithCacheSize(0))
			if err != nil {
				t.Fatal(err)
			}
			after, err := crashSegDigest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !maps32Equal(before, after) {
				t.Fatal("second Open changed the segment files")
			}
			e := &raft.Log{Index: wantLast + 1, Term: 1 + (wantLast+1)/40, Type: raft.LogCommand, Data: corPayload(wantLast + 1)}
			segment.Stamp(e)
			if err := l.StoreLogs([]*raft.Log{e}); err != nil {
				t.Fatalf("store after the cut: %v", err)
			}
			corCheck(t, l, 1, wantLast+1)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenRepairCutsAtFirstDamage(t *testing.T) {
	const n = corN
	dir := t.TempDir()
	corWrite(t, dir, n)
	segs := corSegs(t, dir)
	s := segs[2]
	fr := s.sc.Frames[1]
	r := s.sc.Recs[fr.First+2]
	flip(t, s.path, r.Off+segment.RecHeaderSize+int64(r.Info.ExtLen)+1)

	if _, err := wal.Open(dir); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open without Repair: %v, want ErrCorrupt", err)
	}
	l, err := wal.Open(dir, wal.Repair(), wal.WithCacheSize(0))
	if err != nil {
		t.Fatalf("Open with Repair: %v", err)
	}
	rep := l.Repaired()
	if rep == nil {
		t.Fatal("Repaired() is nil after a repair")
	}
	cutFrom := s.sc.Recs[fr.First].Info.Index
	var removed []string
	for _, later := range segs[3:] {
		removed = append(removed, later.name)
	}
	if rep.Segment != s.name || rep.Offset != fr.Off || rep.CutFrom != cutFrom || rep.CutTo != n ||
		!slices.Equal(rep.RemovedSegments, removed) || rep.Reason == "" {
		t.Fatalf("repair report %+v, want segment %s offset %d cut [%d,%d] removed %v", rep, s.name, fr.Off, cutFrom, uint64(n), removed)
	}
	corCheck(t, l, 1, cutFrom-1)
	for _, name := range removed {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment %s after the cut still exists: %v", name, err)
		}
	}
	if got := fileSize(t, s.path); got != fr.Off {
		t.Fatalf("%s is %d bytes, want cut at %d", s.name, got, fr.Off)
	}
	// Usable afterwards: StoreLogs continues at CutFrom, and the result
	// reopens cleanly without Repair.
	var batch []*raft.Log
	for i := cutFrom; i <= n; i++ {
		e := &raft.Log{Index: i, Term: 1 + i/40, Type: raft.LogCommand, Data: corPayload(i)}
		segment.Stamp(e)
		batch = append(batch, e)
	}
	if err := l.StoreLogs(batch); err != nil {
		t.Fatalf("store from CutFrom %d: %v", cutFrom, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = wal.Open(dir, wal.WithCacheSize(0))
	if err != nil {
		t.Fatalf("reopen after repair: %v", err)
	}
	defer l.Close()
	if l.Repaired() != nil {
		t.Fatal("clean reopen reports a repair")
	}
	corCheck(t, l, 1, n)
}

// Damage in the last segment with valid frames after it: Repair cuts there
// and CutTo names the highest index it removed, from the same file.
func TestOpenRepairInLastSegmentReportsCutTo(t *testing.T) {
	const n = corN
	dir := t.TempDir()
	corWrite(t, dir, n)
	segs := corSegs(t, dir)
	s := segs[len(segs)-1]
	if len(s.sc.Frames) < 2 {
		t.Fatal("test bug: the last segment has one frame")
	}
	fr := s.sc.Frames[0]
	flip(t, s.path, fr.Off+16)
	l, err := wal.Open(dir, wal.Repair())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep := l.Repaired()
	cutFrom := s.sc.Recs[fr.First].Info.Index
	if rep == nil || rep.Segment != s.name || rep.Offset != fr.Off || rep.CutFrom != cutFrom || rep.CutTo != n || len(rep.RemovedSegments) != 0 {
		t.Fatalf("repair report %+v, want %s offset %d cut [%d,%d], nothing removed", rep, s.name, fr.Off, cutFrom, uint64(n))
	}
	corCheck(t, l, 1, cutFrom-1)
}

func TestGetLogRefusesRotOnRead(t *testing.T) {
	const n = corN
	dir := t.TempDir()
	corWrite(t, dir, n)
	segs := corSegs(t, dir)
	l, err := wal.Open(dir, wal.WithCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// A data byte of entry i rots after a clean Open.
	s := segs[1]
	r := s.sc.Recs[2]
	i := r.Info.Index
	flip(t, s.path, r.Off+segment.RecHeaderSize+int64(r.Info.ExtLen)+20)
	var e raft.Log
	err = l.GetLog(i, &e)
	if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, wal.ErrPayloadMismatch) {
		t.Fatalf("GetLog(%d) of a rotted body: %v, want ErrCorrupt and ErrPayloadMismatch", i, err)
	}
	var ge *wal.GuardError
	if !errors.As(err, &ge) {
		t.Fatalf("%T is not a *GuardError", err)
	}
	want := corPayload(i)
	if ge.Op != wal.OpGet || ge.Index != i || ge.Term != 1+i/40 || ge.Segment != s.name || ge.Offset != r.Off ||
		ge.StoredLen != uint32(len(want)) || ge.ExpectedLen != uint32(len(want)) || !ge.LenEqual ||
		ge.ExpectedCRC != segment.Checksum(want) || ge.StoredCRC == ge.ExpectedCRC || ge.CRCEqual {
		t.Fatalf("diagnostic %+v", ge)
	}
	if msg := err.Error(); strings.Contains(msg, "SECRET-PAYLOAD") || strings.Contains(msg, string(want[:16])) {
		t.Fatalf("error message carries payload bytes: %s", msg)
	}
	if e.Data != nil || e.Index != 0 {
		t.Fatalf("refused GetLog returned an entry: index %d, %d data bytes", e.Index, len(e.Data))
	}
	// Its neighbours are fine; the rot is refused on every read.
	if err := l.GetLog(i+1, &e); err != nil {
		t.Fatalf("neighbour %d: %v", i+1, err)
	}
	if err := l.GetLog(i, &e); !errors.Is(err, wal.ErrPayloadMismatch) {
		t.Fatalf("second read: %v", err)
	}

	// A rotted record header (the term) is ErrCorrupt too, located.
	r2 := s.sc.Recs[4]
	flip(t, s.path, r2.Off+16)
	err = l.GetLog(r2.Info.Index, &e)
	if !errors.Is(err, wal.ErrCorrupt) || !errors.As(err, &ge) || ge.Index != r2.Info.Index || ge.Offset != r2.Off || ge.Segment != s.name {
		t.Fatalf("GetLog(%d) of a rotted header: %v", r2.Info.Index, err)
	}
}

// Repair cuts at a damaged header of a segment that is not the last one:
// that segment and every later one are removed and reported.
func TestRepairCutsAtDamagedSealedSegmentHeader(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithSegmentSize(1024))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 60; i++ {
		if err := l.StoreLogs([]*raft.Log{stamped(i, 1, strings.Repeat("p", 100))}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil || len(names) < 3 {
		t.Fatalf("segments %v, %v", names, err)
	}
	victim := filepath.Join(dir, names[1])
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0xff
	if err := os.WriteFile(victim, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Open(dir); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open without Repair: %v", err)
	}
	l, err = wal.Open(dir, wal.Repair())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep := l.Repaired()
	if rep == nil || rep.Segment != names[1] || rep.Offset != 0 || len(rep.RemovedSegments) != len(names)-1 || rep.CutTo != 60 {
		t.Fatalf("report %+v", rep)
	}
	last, _ := l.LastIndex()
	if last != rep.CutFrom-1 {
		t.Fatalf("last %d, cut from %d", last, rep.CutFrom)
	}
	if err := l.StoreLogs([]*raft.Log{stamped(last+1, 1, "again")}); err != nil {
		t.Fatal(err)
	}
}

// Preallocation: the tail segment is zero-filled ahead of its frames, the
// zeros are read as "not written yet" in the tail and in sealed segments,
// and acknowledged frames zeroed in a sealed segment are still caught (the
// next segment's base leaves a gap).
func TestPreallocatedZerosAreNotDamage(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithSegmentSize(8<<10), wal.WithPrealloc(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 100; i++ {
		if err := l.StoreLogs([]*raft.Log{stamped(i, 1, strings.Repeat("z", 200))}); err != nil {
			t.Fatal(err)
		}
	}
	names, _, _ := segment.SegmentFiles(wal.OSFS{}, dir)
	if len(names) < 3 {
		t.Fatalf("segments %v", names)
	}
	tailPath := filepath.Join(dir, names[len(names)-1])
	l.Mu().RLock()
	segs := l.Segs()
	logical := segs[len(segs)-1].Size
	l.Mu().RUnlock()
	if fileSize(t, tailPath) <= logical {
		t.Fatalf("tail not preallocated: file %d bytes, frames end at %d", fileSize(t, tailPath), logical)
	}
	l.Close()
	l, err = wal.Open(dir, wal.WithSegmentSize(8<<10), wal.WithPrealloc(4<<10))
	if err != nil {
		t.Fatalf("reopen over preallocated zeros: %v", err)
	}
	for i := uint64(1); i <= 100; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || string(e.Data) != strings.Repeat("z", 200) {
			t.Fatalf("get %d after reopen: %v", i, err)
		}
	}
	if last, _ := l.LastIndex(); last != 100 {
		t.Fatalf("last %d after reopen", last)
	}
	if err := l.StoreLogs([]*raft.Log{stamped(101, 1, "next")}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// Zero the last frame of a sealed segment: an acknowledged batch.
	sealed := filepath.Join(dir, names[0])
	sc, err := segment.ScanSegment(wal.OSFS{}, sealed)
	if err != nil {
		t.Fatal(err)
	}
	last := sc.Frames[len(sc.Frames)-1]
	b, _ := os.ReadFile(sealed)
	copy(b[last.Off:], make([]byte, sc.Size-last.Off))
	os.WriteFile(sealed, b, 0o600)
	if _, err := wal.Open(dir); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("zeroed acknowledged frames in a sealed segment: Open gave %v, want ErrCorrupt", err)
	}
}
