package faultfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobraft/jobraft/wal/vfs"
)

// A stall delays the next Sync only: the one after it is not stalled (the
// stall is spent), and a Sync that fails does not spend it.
func TestStallNextSyncOnce(t *testing.T) {
	fs := New(vfs.OSFS{})
	f, err := fs.OpenFile(filepath.Join(t.TempDir(), "seg"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const d = 100 * time.Millisecond
	fs.StallNextSync(d)
	fs.FailSyncs(os.ErrInvalid)
	if err := f.Sync(); err == nil {
		t.Fatal("a failing Sync succeeded")
	}
	fs.FailSyncs(nil)
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("stalled Sync took %s, want at least %s", took, d)
	}
	fs.mu.Lock()
	left := fs.stall
	fs.mu.Unlock()
	if left != 0 {
		t.Fatalf("the stall was not spent by the Sync it delayed: %s left", left)
	}
}
