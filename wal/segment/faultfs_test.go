package segment_test

// Fault tests over wal/faultfs: a write error, a short write, an fsync error or
// a full disk fails StoreLogs with wal.ErrFailed, and the log then refuses every
// write until it is reopened (an fsync is never retried), even once the
// fault is gone. Reopened on a healthy file system, the log holds every
// acknowledged batch and all or none of the failed one.

import (
	"errors"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// ftBatch returns the crash tests' entries [a, b], term 1+i/100.
func ftBatch(a, b uint64) []*raft.Log {
	var out []*raft.Log
	for i := a; i <= b; i++ {
		out = append(out, crashEntry(i, 1+i/100))
	}
	return out
}

// ftCheck asserts the log holds exactly [1, last] as ftBatch wrote it.
func ftCheck(t *testing.T, l *wal.Log, last uint64) {
	t.Helper()
	m := newCrashModel()
	for i := uint64(1); i <= last; i++ {
		m.terms[i] = 1 + i/100
	}
	m.first, m.last = 1, last
	if last == 0 {
		m.first = 0
	}
	first, _ := l.FirstIndex()
	got, _ := l.LastIndex()
	if err := crashCheck(l, first, got, m); err != nil {
		t.Fatal(err)
	}
}

func TestFaultFailsTheLogUntilReopened(t *testing.T) {
	faults := []struct {
		name   string
		arm    func(f *faultfs.FS)
		disarm func(f *faultfs.FS)
		// present: whether a reopened log may hold the failed batch
		// (an fsync error leaves it whole in the page cache).
		mayBePresent bool
	}{
		{"fsync error", func(f *faultfs.FS) { f.FailSyncs(syscall.EIO) }, func(f *faultfs.FS) { f.FailSyncs(nil) }, true},
		{"write error", func(f *faultfs.FS) { f.FailWrites(syscall.EIO) }, func(f *faultfs.FS) { f.FailWrites(nil) }, false},
		{"short write", func(f *faultfs.FS) { f.ShortWrites(true) }, func(f *faultfs.FS) { f.ShortWrites(false) }, false},
		{"disk full", func(f *faultfs.FS) { f.LimitSpace(5000) }, func(f *faultfs.FS) { f.LimitSpace(-1) }, false},
		{"disk full at once", func(f *faultfs.FS) { f.LimitSpace(0) }, func(f *faultfs.FS) { f.LimitSpace(-1) }, false},
	}
	layouts := []struct {
		name    string
		segSize int64
	}{
		{"in the tail segment", 64 << 20},
		{"at a rotation", 20 << 10}, // each 40-entry batch fills a segment
	}
	for _, fc := range faults {
		for _, lay := range layouts {
			t.Run(fc.name+"/"+lay.name, func(t *testing.T) {
				dir := t.TempDir()
				ffs := faultfs.New(wal.OSFS{})
				l, err := wal.Open(dir, wal.WithFS(ffs), wal.WithSegmentSize(lay.segSize))
				if err != nil {
					t.Fatal(err)
				}
				const acked = 200
				for a := uint64(1); a <= acked; a += 40 {
					if err := l.StoreLogs(ftBatch(a, a+39)); err != nil {
						t.Fatal(err)
					}
				}
				fc.arm(ffs)
				err = l.StoreLogs(ftBatch(acked+1, acked+40))
				if err == nil {
					t.Fatalf("StoreLogs acknowledged a batch under %s", fc.name)
				}
				if !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("StoreLogs under %s: %v, want wal.ErrFailed", fc.name, err)
				}
				fc.disarm(ffs)
				// Refused from now on, with the fault gone: never a retry.
				if err := l.StoreLogs(ftBatch(acked+1, acked+40)); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("retry of the failed batch: %v, want wal.ErrFailed", err)
				}
				if err := l.StoreLogs(ftBatch(acked+41, acked+41)); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("a later batch: %v, want wal.ErrFailed", err)
				}
				if err := l.DeleteRange(150, acked); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("truncation: %v, want wal.ErrFailed", err)
				}
				if err := l.DeleteRange(1, 10); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("compaction: %v, want wal.ErrFailed", err)
				}
				if err := l.SyncFloor(); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("SyncFloor: %v, want wal.ErrFailed", err)
				}
				// What was acknowledged still reads back.
				if last, _ := l.LastIndex(); last != acked {
					t.Fatalf("failed log reports last index %d, want %d", last, acked)
				}
				ftCheck(t, l, acked)
				_ = l.Close() // may report the failure; the reopen decides

				l, err = wal.Open(dir, wal.WithCacheSize(0))
				if err != nil {
					t.Fatalf("reopen after %s: %v", fc.name, err)
				}
				last, _ := l.LastIndex()
				switch {
				case last == acked:
				case last == acked+40 && fc.mayBePresent:
				default:
					t.Fatalf("reopened log ends at %d: want %d (failed batch absent) or all of it", last, acked)
				}
				ftCheck(t, l, last)
				// Healthy again: the log continues after what it holds.
				if err := l.StoreLogs(ftBatch(last+1, last+5)); err != nil {
					t.Fatalf("store after reopen: %v", err)
				}
				ftCheck(t, l, last+5)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A returned StoreLogs is on disk: exactly one fsync per batch (no
// rotation), and none is skipped.
func TestStoreLogsSyncsOncePerBatch(t *testing.T) {
	ffs := faultfs.New(wal.OSFS{})
	l, err := wal.Open(t.TempDir(), wal.WithFS(ffs))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for k := uint64(0); k < 20; k++ {
		a := 1 + k*16
		before := ffs.Syncs()
		if err := l.StoreLogs(ftBatch(a, a+15)); err != nil {
			t.Fatal(err)
		}
		if got := ffs.Syncs() - before; got != 1 {
			t.Fatalf("batch %d: %d fsyncs, want exactly 1", k, got)
		}
	}
	// A batch whose fsync fails is not acknowledged.
	ffs.FailSyncs(syscall.EIO)
	if err := l.StoreLogs(ftBatch(321, 330)); !errors.Is(err, wal.ErrFailed) {
		t.Fatalf("StoreLogs with a failing fsync: %v", err)
	}
	if last, _ := l.LastIndex(); last != 320 {
		t.Fatalf("unsynced batch became visible: last index %d", last)
	}
	var e raft.Log
	if err := l.GetLog(321, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of the unsynced batch: %v, want ErrLogNotFound", err)
	}
}
