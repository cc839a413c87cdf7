package wal

// Fuzz targets: segment scanning and record decoding on arbitrary bytes, and
// Open on arbitrary segment files. Neither may panic; Open returns a log or
// a clean ErrCorrupt, and a log it returns answers every GetLog in
// [first, last] with an entry or a typed error.
//
//	go test ./wal/ -run '^$' -fuzz FuzzScanSegment -fuzztime 10s
//	go test ./wal/ -run '^$' -fuzz FuzzOpen -fuzztime 10s

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
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
	l, err := Open(dir, WithSegmentSize(600))
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
	names, _, err := segmentFiles(OSFS{}, dir)
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
	for _, at := range []int{3, 20, segHeaderSize + 5, segHeaderSize + frameHeaderSize + 9, len(seg) - 2} {
		if at < len(seg) {
			b := append([]byte(nil), seg...)
			b[at] ^= 0x40
			out = append(out, b)
		}
	}
	out = append(out, seg[:len(seg)/2], seg[:segHeaderSize], append(append([]byte(nil), seg...), make([]byte, 64)...))
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
		_, _ = decodeRecord(data, &l)
		_, _ = decodeRecordHeader(data)
		_, _ = decodeFrameHeader(data)

		s := scanBytes("fuzz.seg", data)
		if s.size != int64(len(data)) {
			t.Fatalf("size %d, have %d bytes", s.size, len(data))
		}
		// What the scan calls valid is valid: frames tile the file from
		// the header up to the damage (or the end), and every record in
		// them decodes and matches its stamp.
		end := int64(len(data))
		if s.bad == nil && s.end < end {
			// A zero tail: preallocated space, not frames.
			if !allZero(data[s.end:]) {
				t.Fatalf("scan ends frames at %d before non-zero bytes", s.end)
			}
			end = s.end
		}
		if s.bad != nil {
			end = s.bad.off
			if end < 0 || end > int64(len(data)) {
				t.Fatalf("damage offset %d outside the file", end)
			}
		}
		pos := int64(segHeaderSize)
		if s.bad != nil && s.bad.off == 0 {
			pos = 0
		}
		for _, fr := range s.frames {
			if fr.off != pos || fr.end <= fr.off || fr.end > end {
				t.Fatalf("frame [%d,%d) does not follow %d (end %d)", fr.off, fr.end, pos, end)
			}
			pos = fr.end
			for k := fr.first; k < fr.first+fr.cnt && fr.cnt > 0 && k < len(s.recs); k++ {
				r := s.recs[k]
				if r.off < fr.off || r.off+int64(r.len) > fr.end {
					t.Fatalf("record [%d,+%d) outside its frame [%d,%d)", r.off, r.len, fr.off, fr.end)
				}
				var e raft.Log
				if _, err := decodeRecord(data[r.off:r.off+int64(r.len)], &e); err != nil {
					t.Fatalf("record at %d accepted by the scan fails to decode: %v", r.off, err)
				}
				if err := verifyStamp(OpGet, &e); err != nil {
					t.Fatalf("record at %d accepted by the scan fails its stamp: %v", r.off, err)
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
		if err := os.WriteFile(filepath.Join(dir, segName(1)), a, 0o600); err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			if err := os.WriteFile(filepath.Join(dir, segName(2)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l, err := Open(dir, WithCacheSize(0))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
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
			var ge *GuardError
			switch {
			case err == nil:
				if e.Index != i {
					t.Fatalf("GetLog(%d) returned index %d", i, e.Index)
				}
			case errors.As(err, &ge), errors.Is(err, ErrCorrupt):
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
