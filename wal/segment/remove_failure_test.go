package segment_test

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// A segment file the log cannot remove (EIO, EROFS, EACCES on one
// directory entry) during a compaction, a truncation or a reset: the log
// stays openable and never revives what it removed.

// removeFailFS fails Remove for the segment files named in fail (base
// names), as a file system does for EIO, EROFS or EACCES on one directory
// entry.
type removeFailFS struct {
	wal.FS
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

func storeRange(t *testing.T, l *wal.Log, a, b, term uint64) {
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

func segNames(t *testing.T, dir string) []string {
	t.Helper()
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A compaction removes whole segments oldest first. When the removal of one
// fails, the log must not go on to remove the next one: the file left
// behind would then be followed by a gap, and Open refuses the log for good
// (ErrCorrupt: "segment base leaves a gap").
func TestCompactionRemoveFailureKeepsLogOpenable(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: wal.OSFS{}}
	var floor atomic.Uint64
	open := func() *wal.Log {
		t.Helper()
		l, err := wal.Open(dir, wal.WithFS(rfs), wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		l.SetCommitFloor(floor.Load)
		return l
	}
	l := open()
	storeRange(t, l, 1, 200, 1)
	names := segNames(t, dir)
	if len(names) < 4 {
		t.Fatalf("test bug: %d segments", len(names))
	}
	rfs.arm(names[0])
	floor.Store(200)
	// Through the last index of the third segment: the first three go.
	sc, err := segment.ScanSegment(wal.OSFS{}, filepath.Join(dir, names[2]))
	if err != nil {
		t.Fatal(err)
	}
	through := sc.Recs[len(sc.Recs)-1].Info.Index
	if err := l.DeleteRange(1, through); err != nil {
		t.Fatal(err)
	}
	// Later compactions, with the disk still refusing: nothing may be
	// removed past the file that could not be.
	if err := l.DeleteRange(through+1, through+1); err != nil {
		t.Fatal(err)
	}
	storeRange(t, l, 201, 260, 1)
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
	if got := segNames(t, dir); got[0] == names[0] {
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
func TestResetRemoveFailureLeftoverNeverRevives(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: wal.OSFS{}}
	var floor atomic.Uint64
	open := func() *wal.Log {
		t.Helper()
		l, err := wal.Open(dir, wal.WithFS(rfs), wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		l.SetCommitFloor(floor.Load)
		return l
	}
	l := open()
	storeRange(t, l, 1, 200, 1)
	names := segNames(t, dir)
	rfs.arm(names[len(names)-1])
	floor.Store(150)
	if err := l.DeleteRange(1, 200); err != nil {
		t.Fatal(err)
	}
	storeRange(t, l, 151, 400, 2)
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
func TestTruncateRemoveFailureKeepsLogOpenable(t *testing.T) {
	dir := t.TempDir()
	rfs := &removeFailFS{FS: wal.OSFS{}}
	open := func() *wal.Log {
		t.Helper()
		l, err := wal.Open(dir, wal.WithFS(rfs), wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	storeRange(t, l, 1, 200, 1)
	names := segNames(t, dir)
	if len(names) < 5 {
		t.Fatalf("test bug: %d segments", len(names))
	}
	rfs.arm(names[len(names)-1])
	sc, err := segment.ScanSegment(wal.OSFS{}, filepath.Join(dir, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	cut := sc.Recs[len(sc.Recs)-1].Info.Index // inside the second segment
	if err := l.DeleteRange(cut, 200); err != nil {
		t.Fatal(err)
	}
	storeRange(t, l, cut, cut+30, 2)
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
