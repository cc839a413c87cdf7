package vfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
	"github.com/jobraft/jobraft/wal/vfs"
)

// Directories MkdirAll creates survive a power loss; with the file
// system's plain MkdirAll (no sync of the parents) they do not.
func TestMkdirAllIsDurable(t *testing.T) {
	for _, durable := range []bool{true, false} {
		base := t.TempDir()
		dir := filepath.Join(base, "a", "b", "c")
		ffs := faultfs.New(wal.OSFS{})
		var err error
		if durable {
			err = vfs.MkdirAll(ffs, dir, 0o700)
		} else {
			err = ffs.MkdirAll(dir, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := ffs.PowerLoss(); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(dir)
		if durable && err != nil {
			t.Fatalf("vfs.MkdirAll: %s after the power loss: %v", dir, err)
		}
		if !durable && !os.IsNotExist(err) {
			t.Fatalf("plain MkdirAll: %s after the power loss: %v, want it gone (the model is not honest)", dir, err)
		}
	}
}

// MkdirAll over a directory that exists changes nothing and syncs nothing.
func TestMkdirAllOverExisting(t *testing.T) {
	dir := t.TempDir()
	ffs := faultfs.New(wal.OSFS{})
	if err := vfs.MkdirAll(ffs, dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := ffs.Changes(); n != 1 { // the MkdirAll itself
		t.Fatalf("%d changes of the disk for an existing directory, want 1", n)
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := vfs.MkdirAll(ffs, f, 0o700); err == nil {
		t.Fatal("MkdirAll over a file succeeded")
	}
}
