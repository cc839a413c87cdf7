package backup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// backupTo writes a backup of snap to path through fsys (create, Write,
// fsync, close), as a host writing a backup file does.
func backupTo(fsys *faultfs.FS, path string, write func(io.Writer) error) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// A power loss at every change of the disk while a backup is written
// leaves a file that Restore refuses typed (leaving the target data dir
// as it was), or the whole backup: never a partial one taken for
// complete.
func TestPowerLossDuringBackupLeavesNoFileTakenForComplete(t *testing.T) {
	m := bigState(t, 2000)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir := t.TempDir()
	write := func(w io.Writer) error {
		_, err := Write(w, snap, member, Options{TempDir: dir})
		return err
	}
	// Count the changes of a whole run, and keep its bytes.
	full := filepath.Join(dir, "full.jrb")
	count := faultfs.New(wal.OSFS{})
	if err := backupTo(count, full, write); err != nil {
		t.Fatal(err)
	}
	changes := count.Changes()
	want, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	members := []raft.Member{{ID: "r1", Address: "127.0.0.1:1", Voter: true}}
	for n := int64(1); n <= changes; n++ {
		path := filepath.Join(dir, "b.jrb")
		_ = os.Remove(path)
		fsys := faultfs.New(wal.OSFS{})
		fsys.PowerLossAt(n)
		if err := backupTo(fsys, path, write); err == nil {
			t.Fatalf("loss before change %d of %d: the backup reported success", n, changes)
		}
		got, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // the loss took the file's name: nothing to restore
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, "restored")
		_, err = Restore(path, target, members)
		switch {
		case err == nil && !bytes.Equal(got, want):
			t.Fatalf("loss before change %d of %d: Restore accepted %d bytes that are not the backup's %d", n, changes, len(got), len(want))
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("loss before change %d of %d: Restore refused %d bytes untyped: %v", n, changes, len(got), err)
		case err != nil:
			if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("loss before change %d: a refused restore left %s (%v)", n, target, serr)
			}
		}
		_ = os.RemoveAll(target)
	}
	t.Logf("%d changes of a %d-byte backup, a loss before each: never a partial backup restored", changes, len(want))
}
