package segment_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// A log that fails closed names the class of its failure (Failure) and
// tells OnFailure once; a reopened log has none.
func TestFailureNamesTheClass(t *testing.T) {
	for _, fc := range []struct {
		name string
		arm  func(f *faultfs.FS)
		want string
	}{
		{"fsync error", func(f *faultfs.FS) { f.FailSyncs(syscall.EIO) }, wal.FailSync},
		{"write error", func(f *faultfs.FS) { f.FailWrites(syscall.EIO) }, wal.FailWrite},
		{"disk full", func(f *faultfs.FS) { f.LimitSpace(0) }, wal.FailNoSpace},
		{"fsync finds the disk full", func(f *faultfs.FS) { f.FailSyncs(syscall.ENOSPC) }, wal.FailNoSpace},
	} {
		t.Run(fc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := faultfs.New(wal.OSFS{})
			var told []string
			l, err := wal.Open(dir, wal.WithFS(ffs), wal.OnFailure(func(c string) { told = append(told, c) }))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.StoreLogs(ftBatch(1, 10)); err != nil {
				t.Fatal(err)
			}
			if got := l.Failure(); got != "" {
				t.Fatalf("healthy log: Failure() = %q", got)
			}
			fc.arm(ffs)
			for i := uint64(0); i < 2; i++ {
				if err := l.StoreLogs(ftBatch(11+10*i, 20+10*i)); !errors.Is(err, wal.ErrFailed) {
					t.Fatalf("store %d under the fault: %v, want ErrFailed", i, err)
				}
			}
			if got := l.Failure(); got != fc.want {
				t.Fatalf("Failure() = %q, want %q", got, fc.want)
			}
			if len(told) != 1 || told[0] != fc.want {
				t.Fatalf("OnFailure told %v, want once %q", told, fc.want)
			}
			l.Close()
			l, err = wal.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := l.Failure(); got != "" {
				t.Fatalf("reopened log: Failure() = %q", got)
			}
		})
	}
}
