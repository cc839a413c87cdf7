package segment_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// firstLog is a *Log under test with a settable floor, reopened on demand.
type firstLog struct {
	t     *testing.T
	dir   string
	opts  []wal.Option
	l     *wal.Log
	floor uint64
}

func (f *firstLog) open() {
	f.t.Helper()
	l, err := wal.Open(f.dir, f.opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.l = l
	l.SetCommitFloor(func() uint64 { return f.floor })
}

func (f *firstLog) reopen() {
	f.t.Helper()
	if err := f.l.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

func (f *firstLog) store(from, to, term uint64) {
	f.t.Helper()
	for a := from; a <= to; a += 5 {
		var batch []*raft.Log
		for i := a; i < a+5 && i <= to; i++ {
			batch = append(batch, stamped(i, term, fmt.Sprintf("entry-%d-%d", i, term)))
		}
		if err := f.l.StoreLogs(batch); err != nil {
			f.t.Fatal(err)
		}
	}
}

// want checks the log's range and that exactly [first, last] is served.
func (f *firstLog) want(step string, first, last uint64) {
	f.t.Helper()
	gf, _ := f.l.FirstIndex()
	gl, _ := f.l.LastIndex()
	if gf != first || gl != last {
		f.t.Fatalf("%s: log [%d,%d], want [%d,%d]", step, gf, gl, first, last)
	}
	var e raft.Log
	if first > 1 {
		if err := f.l.GetLog(first-1, &e); !errors.Is(err, raft.ErrLogNotFound) {
			f.t.Fatalf("%s: GetLog(%d) below the first index = %v, want ErrLogNotFound", step, first-1, err)
		}
	}
	for i := first; i <= last && last != 0; i++ {
		if err := f.l.GetLog(i, &e); err != nil || e.Index != i {
			f.t.Fatalf("%s: GetLog(%d) = %v (index %d)", step, i, err, e.Index)
		}
	}
}

// A compaction is durable per entry: after a restart FirstIndex is where
// the compaction left it, never lower, even when the compacted entries
// share a segment file with live ones, and whatever truncations, rotations
// and resets came after it. Before the first-index mark a partly compacted
// segment's entries reappeared on reopen (FirstIndex moved backwards to the
// segment's first entry), which let raft.Node fall back to an older
// snapshot than the one the log was compacted against.
func TestCompactionSurvivesRestart(t *testing.T) {
	for _, segSize := range []int64{1 << 20, 700} { // one segment; many
		t.Run(fmt.Sprintf("segment=%d", segSize), func(t *testing.T) {
			f := &firstLog{t: t, dir: t.TempDir(), opts: []wal.Option{wal.WithSegmentSize(segSize), wal.WithCacheSize(0)}}
			f.open()
			defer func() { f.l.Close() }()
			f.store(1, 100, 1)
			f.floor = 80
			if err := f.l.DeleteRange(1, 42); err != nil {
				t.Fatal(err)
			}
			f.want("compacted to 42", 43, 100)
			f.reopen()
			f.want("compacted to 42, reopened", 43, 100)

			// A suffix truncation removes the segments above its cut,
			// maybe the one holding the compaction's mark.
			if err := f.l.DeleteRange(90, 100); err != nil {
				t.Fatal(err)
			}
			f.reopen()
			f.want("truncated at 90, reopened", 43, 89)
			f.store(90, 140, 2)
			f.floor = 130
			if err := f.l.DeleteRange(43, 117); err != nil {
				t.Fatal(err)
			}
			f.reopen()
			f.want("compacted to 117, reopened", 118, 140)
			f.reopen() // a second open changes nothing
			f.want("reopened twice", 118, 140)

			// A reset (snapshot install) discards the mark with the log.
			if err := f.l.DeleteRange(118, 140); err != nil {
				t.Fatal(err)
			}
			f.floor = 200
			f.store(201, 230, 3)
			f.reopen()
			f.want("reset, stored from 201, reopened", 201, 230)
		})
	}
}

// A log written by format version 1 (testdata/format1: entries 1..29 over
// six segments, the last two of term 5 after a suffix truncation) opens as
// before. A compaction then continues it in a new version 2 segment (never
// appending a version 2 frame to a version 1 file) and is durable.
func TestFormat1LogIsReadAndContinued(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "format1")
	names, _, err := segment.SegmentFiles(wal.OSFS{}, src)
	if err != nil || len(names) < 2 {
		t.Fatalf("fixture: %v %v", names, err)
	}
	before := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if h, err := segment.DecodeSegHeader(b); err != nil || h.Version != 1 {
			t.Fatalf("fixture %s: version %d, %v", n, h.Version, err)
		}
		before[n] = b
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &firstLog{t: t, dir: dir, opts: []wal.Option{wal.WithCacheSize(0)}}
	f.open()
	defer func() { f.l.Close() }()
	f.want("format 1 opened", 1, 29)
	for i := uint64(1); i <= 29; i++ {
		term := 1 + i/10
		if i >= 28 {
			term = 5
		}
		var e raft.Log
		if err := f.l.GetLog(i, &e); err != nil || e.Term != term || string(e.Data) != fmt.Sprintf("v1-entry-%d", i) {
			t.Fatalf("index %d: %v term %d len %d, want term %d", i, err, e.Term, len(e.Data), term)
		}
	}
	f.floor = 25
	if err := f.l.DeleteRange(1, 12); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	f.want("format 1 compacted to 12, reopened", 13, 29)
	f.store(30, 33, 5)
	f.reopen()
	f.want("continued, reopened", 13, 33)

	after, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	newer := 0
	for _, n := range after {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		h, err := segment.DecodeSegHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		old, wasOld := before[n]
		switch {
		case wasOld && h.Version != 1:
			t.Fatalf("%s rewritten as version %d", n, h.Version)
		case wasOld && sc(b).FirstMark != 0:
			t.Fatalf("%s: a version 1 segment got a first-index mark", n)
		case wasOld && len(b) < len(old):
			t.Fatalf("%s shrank from %d to %d bytes", n, len(old), len(b))
		case !wasOld:
			if h.Version != segment.FormatVersion {
				t.Fatalf("new segment %s has version %d", n, h.Version)
			}
			newer++
		}
	}
	if newer == 0 {
		t.Fatal("the log was not continued in a new segment")
	}
}

func sc(b []byte) *segment.Scanned { return segment.ScanBytes("seg", b) }

// A first-index mark is only valid in a version 2 segment, and never above
// the log's last index: either is damage.
func TestFirstMarkValidation(t *testing.T) {
	v1 := segment.SegHeader{Version: 1, Seq: 1, Base: 1}.Encode()
	if s := sc(append(v1, segment.FirstMarkFrame(1, 0)...)); s.Bad == nil {
		t.Fatal("a first-index mark in a version 1 segment parsed as valid")
	}
	v2 := segment.SegHeader{Version: 2, Seq: 1, Base: 1}.Encode()
	if s := sc(append(v2, segment.FirstMarkFrame(7, 0)...)); s.Bad != nil || s.FirstMark != 7 {
		t.Fatalf("a version 2 mark: %+v, mark %d", s.Bad, s.FirstMark)
	}
	bad := segment.FirstMarkFrame(7, 0)
	bad[segment.FrameHeaderSize+3] ^= 0xff
	if s := sc(append(v2, bad...)); s.Bad == nil {
		t.Fatal("a mark whose body fails its CRC parsed as valid")
	}
	if _, err := segment.DecodeFirstMark(make([]byte, segment.FirstMarkSize)); err == nil {
		t.Fatal("an all-zero mark body decoded")
	}

	// A mark beyond the last index, then a valid batch after it (so it is
	// not a torn tail): Open refuses with ErrCorrupt.
	dir := t.TempDir()
	f := &firstLog{t: t, dir: dir, opts: []wal.Option{wal.WithPrealloc(0)}}
	f.open()
	f.store(1, 10, 1)
	f.l.WMu().Lock()
	err := f.l.WriteTail(segment.FirstMarkFrame(50, 0))
	f.l.WMu().Unlock()
	if err != nil {
		t.Fatal(err)
	}
	f.store(11, 12, 1)
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err := wal.Open(dir); !errors.Is(err, wal.ErrCorrupt) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open over a first-index mark beyond the last index = %v, want ErrCorrupt", err)
	}
}
