package segment_test

// Fuzz targets: segment scanning and record decoding on arbitrary bytes, and
// Open on arbitrary segment files. Neither may panic; Open returns a log or
// a clean ErrCorrupt, and a log it returns answers every GetLog in
// [first, last] with an entry or a typed error.
//
//	go test ./wal/segment/ -run '^$' -fuzz FuzzScanSegment -fuzztime 10s
//	go test ./wal/segment/ -run '^$' -fuzz FuzzOpen -fuzztime 10s

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// fuzzSegments writes a small real log (three segments, a truncation and
// an unstamped entry) and returns its segment files' bytes.
func fuzzSegments(f testing.TB) [][]byte {
	f.Helper()
	dir, err := os.MkdirTemp("", "wal-fuzz-seed-")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, wal.WithSegmentSize(600))
	if err != nil {
		f.Fatal(err)
	}
	for i := uint64(1); i <= 12; i += 3 {
		batch := []*raft.Log{
			{Index: i, Term: i, Type: raft.LogCommand, Data: []byte("alpha beta gamma")},
			{Index: i + 1, Term: i, Type: raft.LogNoop},
			{Index: i + 2, Term: i + 1, Type: raft.LogCommand, Data: []byte{0, 1, 2, 3}},
		}
		segment.Stamp(batch[0])
		segment.Stamp(batch[2])
		if err := l.StoreLogs(batch); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.DeleteRange(11, 12); err != nil {
		f.Fatal(err)
	}
	e := &raft.Log{Index: 11, Term: 20, Type: raft.LogCommand, Data: []byte("after truncation")}
	segment.Stamp(e)
	if err := l.StoreLogs([]*raft.Log{e}); err != nil {
		f.Fatal(err)
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) < 3 {
		f.Fatalf("seed log has %d segments, want 3 or more", len(out))
	}
	return out
}

// fuzzVariants are damaged copies of seg: a flipped byte in each header and
// the body, a cut, and a zero tail.
func fuzzVariants(seg []byte) [][]byte {
	var out [][]byte
	for _, at := range []int{3, 20, segment.SegHeaderSize + 5, segment.SegHeaderSize + segment.FrameHeaderSize + 9, len(seg) - 2} {
		if at < len(seg) {
			b := append([]byte(nil), seg...)
			b[at] ^= 0x40
			out = append(out, b)
		}
	}
	out = append(out, seg[:len(seg)/2], seg[:segment.SegHeaderSize], append(append([]byte(nil), seg...), make([]byte, 64)...))
	return out
}

func FuzzScanSegment(f *testing.F) {
	for _, seg := range fuzzSegments(f) {
		f.Add(seg)
		for _, v := range fuzzVariants(seg) {
			f.Add(v)
		}
	}
	f.Add([]byte{})
	f.Add([]byte("JRWALSEG"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var l raft.Log
		_, _ = segment.DecodeRecord(data, &l)
		_, _ = segment.DecodeRecordHeader(data)
		_, _ = segment.DecodeFrameHeader(data)

		s := segment.ScanBytes("fuzz.seg", data)
		if s.Size != int64(len(data)) {
			t.Fatalf("size %d, have %d bytes", s.Size, len(data))
		}
		// What the scan calls valid is valid: frames tile the file from
		// the header up to the damage (or the end), and every record in
		// them decodes and matches its stamp.
		end := int64(len(data))
		if s.Bad == nil && s.End < end {
			// A zero tail: preallocated space, not frames.
			if !segment.AllZero(data[s.End:]) {
				t.Fatalf("scan ends frames at %d before non-zero bytes", s.End)
			}
			end = s.End
		}
		if s.Bad != nil {
			end = s.Bad.Off
			if end < 0 || end > int64(len(data)) {
				t.Fatalf("damage offset %d outside the file", end)
			}
		}
		pos := int64(segment.SegHeaderSize)
		if s.Bad != nil && s.Bad.Off == 0 {
			pos = 0
		}
		for _, fr := range s.Frames {
			if fr.Off != pos || fr.End <= fr.Off || fr.End > end {
				t.Fatalf("frame [%d,%d) does not follow %d (end %d)", fr.Off, fr.End, pos, end)
			}
			pos = fr.End
			for k := fr.First; k < fr.First+fr.Cnt && fr.Cnt > 0 && k < len(s.Recs); k++ {
				r := s.Recs[k]
				if r.Off < fr.Off || r.Off+int64(r.Len) > fr.End {
					t.Fatalf("record [%d,+%d) outside its frame [%d,%d)", r.Off, r.Len, fr.Off, fr.End)
				}
				var e raft.Log
				if _, err := segment.DecodeRecord(data[r.Off:r.Off+int64(r.Len)], &e); err != nil {
					t.Fatalf("record at %d accepted by the scan fails to decode: %v", r.Off, err)
				}
				if err := segment.VerifyStampFor(wal.OpGet, &e); err != nil {
					t.Fatalf("record at %d accepted by the scan fails its stamp: %v", r.Off, err)
				}
			}
		}
		if pos != end {
			t.Fatalf("valid frames end at %d, scan says valid up to %d", pos, end)
		}
	})
}

func FuzzOpen(f *testing.F) {
	segs := fuzzSegments(f)
	f.Add(segs[0], []byte{})
	f.Add(segs[0], segs[1])
	f.Add(segs[len(segs)-2], segs[len(segs)-1])
	for _, v := range fuzzVariants(segs[1]) {
		f.Add(segs[0], v)
		f.Add(v, segs[2])
	}
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segment.SegName(1)), a, 0o600); err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			if err := os.WriteFile(filepath.Join(dir, segment.SegName(2)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l, err := wal.Open(dir, wal.WithCacheSize(0))
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Open failed with an untyped error: %v", err)
			}
			return
		}
		defer l.Close()
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if (first == 0) != (last == 0) || first > last {
			t.Fatalf("log bounds [%d,%d]", first, last)
		}
		if last != 0 && last-first > 1<<16 {
			t.Fatalf("log bounds [%d,%d] from %d bytes", first, last, len(a)+len(b))
		}
		for i := first; i <= last && last != 0; i++ {
			var e raft.Log
			err := l.GetLog(i, &e)
			var ge *wal.GuardError
			switch {
			case err == nil:
				if e.Index != i {
					t.Fatalf("GetLog(%d) returned index %d", i, e.Index)
				}
			case errors.As(err, &ge), errors.Is(err, wal.ErrCorrupt):
			default:
				t.Fatalf("GetLog(%d): untyped error %v", i, err)
			}
		}
		// A log that opened stays usable: it takes the next entry.
		e := &raft.Log{Index: last + 1, Term: 1 << 40, Type: raft.LogCommand, Data: []byte("next")}
		if last == 0 {
			e.Index = l.Floor() + 1
		}
		segment.Stamp(e)
		if err := l.StoreLogs([]*raft.Log{e}); err != nil {
			t.Fatalf("store %d after Open: %v", e.Index, err)
		}
	})
}
