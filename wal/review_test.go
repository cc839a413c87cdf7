package wal

// Tests from an adversarial review of the log store. Each one failed before
// the fix it names.

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// removeFailFS fails Remove for the segment files named in fail (base
// names), as a file system does for EIO, EROFS or EACCES on one directory
// entry.
type removeFailFS struct {
	FS
	mu   sync.Mutex
	fail map[string]bool
}

func (f *removeFailFS) Remove(name string) error {
	f.mu.Lock()
	bad := f.fail[filepath.Base(name)]
	f.mu.Unlock()
	if bad {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EIO}
	}
	return f.FS.Remove(name)
}

func (f *removeFailFS) arm(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = map[string]bool{}
	for _, n := range names {
		f.fail[n] = true
	}
}

func reviewStore(t *testing.T, l *Log, a, b, term uint64) {
	t.Helper()
	for i := a; i <= b; i += 8 {
		var batch []*raft.Log
		for k := i; k < i+8 && k <= b; k++ {
			batch = append(batch, crashEntry(k, term))
		}
		if err := l.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
}

func reviewSegNames(t *testing.T, dir string) []string {
	t.Helper()
	names, _, err := segmentFiles(OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A compaction removes whole segments oldest first. When the removal of one
// fails, the log must not go on to remove the next one: the file left
// behind would then be followed by a gap, and Open refuses the log for good
// (ErrCorrupt: "segment base leaves a gap").
func TestReviewCompactionRemoveFailureKeepsLogOpenable(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: OSFS{}}
	var floor atomic.Uint64
	open := func() *Log {
		t.Helper()
		l, err := Open(dir, WithFS(rfs), WithSegmentSize(4<<10), WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		l.SetCommitFloor(floor.Load)
		return l
	}
	l := open()
	reviewStore(t, l, 1, 200, 1)
	names := reviewSegNames(t, dir)
	if len(names) < 4 {
		t.Fatalf("test bug: %d segments", len(names))
	}
	rfs.arm(names[0])
	floor.Store(200)
	// Through the last index of the third segment: the first three go.
	sc, err := scanSegment(OSFS{}, filepath.Join(dir, names[2]))
	if err != nil {
		t.Fatal(err)
	}
	through := sc.recs[len(sc.recs)-1].info.Index
	if err := l.DeleteRange(1, through); err != nil {
		t.Fatal(err)
	}
	// Later compactions, with the disk still refusing: nothing may be
	// removed past the file that could not be.
	if err := l.DeleteRange(through+1, through+1); err != nil {
		t.Fatal(err)
	}
	reviewStore(t, l, 201, 260, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rfs.arm()

	m := newCrashModel()
	for i := uint64(1); i <= 260; i++ {
		m.terms[i] = 1
	}
	m.first, m.last = through+2, 260
	l = open()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if err := crashCheck(l, first, last, m); err != nil {
		t.Fatal(err)
	}
	// Healthy again: the next compaction removes the leftovers.
	floor.Store(255)
	if err := l.DeleteRange(first, 250); err != nil {
		t.Fatal(err)
	}
	if got := reviewSegNames(t, dir); got[0] == names[0] {
		t.Fatalf("segment %s whose removal failed is never retried: %v", names[0], got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open()
	defer l.Close()
	first, _ = l.FirstIndex()
	last, _ = l.LastIndex()
	m.first = 251
	if err := crashCheck(l, first, last, m); err != nil {
		t.Fatal(err)
	}
}

// A reset (snapshot install) whose removal of an older segment fails leaves
// that file behind. It is harmless only while the reset segment exists: a
// later compaction that removes the reset segment must not let it replay
// again (stale pre-reset entries, or a gap that refuses Open).
func TestReviewResetRemoveFailureLeftoverNeverRevives(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: OSFS{}}
	var floor atomic.Uint64
	open := func() *Log {
		t.Helper()
		l, err := Open(dir, WithFS(rfs), WithSegmentSize(4<<10), WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		l.SetCommitFloor(floor.Load)
		return l
	}
	l := open()
	reviewStore(t, l, 1, 200, 1)
	names := reviewSegNames(t, dir)
	rfs.arm(names[len(names)-1])
	floor.Store(150)
	if err := l.DeleteRange(1, 200); err != nil {
		t.Fatal(err)
	}
	reviewStore(t, l, 151, 400, 2)
	floor.Store(390)
	if err := l.DeleteRange(151, 390); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rfs.arm()

	m := newCrashModel()
	for i := uint64(151); i <= 400; i++ {
		m.terms[i] = 2
	}
	m.first, m.last = 391, 400
	l = open()
	defer l.Close()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if err := crashCheck(l, first, last, m); err != nil {
		t.Fatal(err)
	}
}

// A suffix truncation removes superseded segments newest first, so that any
// prefix of the removals replays to the truncated log. When one removal
// fails, removing the older ones after it leaves a gap before the file that
// stayed, and Open refuses the log.
func TestReviewTruncateRemoveFailureKeepsLogOpenable(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: OSFS{}}
	open := func() *Log {
		t.Helper()
		l, err := Open(dir, WithFS(rfs), WithSegmentSize(4<<10), WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	reviewStore(t, l, 1, 200, 1)
	names := reviewSegNames(t, dir)
	if len(names) < 5 {
		t.Fatalf("test bug: %d segments", len(names))
	}
	rfs.arm(names[len(names)-1])
	sc, err := scanSegment(OSFS{}, filepath.Join(dir, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	cut := sc.recs[len(sc.recs)-1].info.Index // inside the second segment
	if err := l.DeleteRange(cut, 200); err != nil {
		t.Fatal(err)
	}
	reviewStore(t, l, cut, cut+30, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rfs.arm()
	m := newCrashModel()
	for i := uint64(1); i < cut; i++ {
		m.terms[i] = 1
	}
	for i := cut; i <= cut+30; i++ {
		m.terms[i] = 2
	}
	m.first, m.last = 1, cut+30
	l = open()
	defer l.Close()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if err := crashCheck(l, first, last, m); err != nil {
		t.Fatal(err)
	}
}

// A record larger than the format's bound (maxRecord) was written and
// acknowledged, but Open reads its header as invalid: as the last frame of
// the last segment it is cut as a torn tail (an acknowledged entry silently
// lost), anywhere else Open refuses the log. StoreLogs must refuse it up
// front, typed, with the log unchanged.
func TestReviewOversizeRecordRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, WithCacheSize(0), WithPrealloc(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	reviewStore(t, l, 1, 1, 1)
	// Unstamped: the store adds a 13-byte stamp, which takes the record
	// just past the bound. The pages are never touched when it is refused.
	big := &raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: make([]byte, maxRecord-recHeaderSize)}
	err = l.StoreLogs([]*raft.Log{big})
	if err == nil {
		l.Close()
		l, err = Open(dir, WithCacheSize(0))
		if err != nil {
			t.Fatalf("StoreLogs acknowledged a %d-byte record; Open then fails: %v", maxRecord+stampSize, err)
		}
		last, _ := l.LastIndex()
		t.Fatalf("StoreLogs acknowledged a %d-byte record; after a reopen the log ends at %d", maxRecord+stampSize, last)
	}
	var ge *GuardError
	if !errors.As(err, &ge) || !errors.Is(err, ErrTooLarge) || ge.Index != 2 {
		t.Fatalf("oversize record: %v, want a GuardError matching ErrTooLarge at index 2", err)
	}
	if last, _ := l.LastIndex(); last != 1 {
		t.Fatalf("refusal changed the log: last %d", last)
	}
	reviewStore(t, l, 2, 3, 1)
}

// Reads run concurrently with every write: appends with rotation,
// compaction, suffix truncation and reset. A read returns the entry it was
// asked for, intact, or raft.ErrLogNotFound; never damage, never another
// index's bytes.
func TestReviewReadsConcurrentWithWrites(t *testing.T) {
	dir := t.TempDir()
	var floor atomic.Uint64
	l, err := Open(dir, WithSegmentSize(4<<10), WithCacheSize(16))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetCommitFloor(floor.Load)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for k := uint64(r); ; k++ {
				select {
				case <-done:
					return
				default:
				}
				first, _ := l.FirstIndex()
				last, _ := l.LastIndex()
				if last == 0 {
					continue
				}
				i := first + k%(last-first+1)
				var e raft.Log
				err := l.GetLog(i, &e)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue
				}
				if err == nil && (e.Index != i || string(e.Data) != string(crashPayload(i, e.Term))) {
					err = errors.New("wrong entry")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(r)
	}
	term := uint64(1)
	next := uint64(1)
	for round := 0; round < 60; round++ {
		reviewStoreNoT(l, next, next+39, term, errs)
		next += 40
		switch round % 4 {
		case 1: // compaction
			first, _ := l.FirstIndex()
			floor.Store(next - 20)
			if err := l.DeleteRange(first, next-25); err != nil {
				t.Fatal(err)
			}
		case 2: // suffix truncation
			term++
			if err := l.DeleteRange(next-10, next-1); err != nil {
				t.Fatal(err)
			}
			next -= 10
		case 3:
			if round%8 == 7 { // reset
				first, _ := l.FirstIndex()
				floor.Store(next + 5)
				if err := l.DeleteRange(first, next-1); err != nil {
					t.Fatal(err)
				}
				next += 6
			}
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func reviewStoreNoT(l *Log, a, b, term uint64, errs chan<- error) {
	for i := a; i <= b; i += 8 {
		var batch []*raft.Log
		for k := i; k < i+8 && k <= b; k++ {
			batch = append(batch, crashEntry(k, term))
		}
		if err := l.StoreLogs(batch); err != nil {
			select {
			case errs <- err:
			default:
			}
			return
		}
	}
}

// A crafted segment whose second record claims an index 2^40 past the first
// (valid checksums) does not make the read-only reader emit 2^40 Corrupt
// records: it reports a bounded number and a note.
func TestReadOnlyBoundsAnImpossibleGap(t *testing.T) {
	dir := t.TempDir()
	buf := segHeader{Version: formatVersion, Seq: 1, Base: 1}.encode()
	for _, ix := range []uint64{1, 1 << 40} {
		e := stamped(ix, 1, "x")
		frame := make([]byte, frameHeaderSize)
		frame = appendRecord(frame, e)
		frameHeader{Kind: frameBatch, Count: 1, BodyLen: uint32(len(frame) - frameHeaderSize)}.put(frame)
		buf = append(buf, frame...)
	}
	if err := os.WriteFile(filepath.Join(dir, segName(1)), buf, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := r.Scan(0, 0, func(*Record) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n > maxGapRecords+2 || len(r.Notes()) == 0 {
		t.Fatalf("%d records, notes %q", n, r.Notes())
	}
}
