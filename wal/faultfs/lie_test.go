package faultfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/wal/vfs"
)

func isSeg(name string) bool { return strings.HasSuffix(name, ".seg") }

// What a lying disk loses: everything written through the FS after the
// checkpoint, files created since included, and nothing the keep filter
// leaves out (the stable store keeps its own durability).
func TestCheckpointRestoreLosesWhatFollowed(t *testing.T) {
	dir, cp := t.TempDir(), filepath.Join(t.TempDir(), "cp")
	fs := New(vfs.OSFS{})
	write := func(name, s string) {
		t.Helper()
		f, err := fs.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	write("1.seg", "a")
	if err := os.WriteFile(filepath.Join(dir, "stable.db"), []byte("term 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fs.Checkpoint(dir, cp, isSeg); err != nil {
		t.Fatal(err)
	}
	write("1.seg", "b") // acknowledged, but only cached
	write("2.seg", "c")
	if err := os.WriteFile(filepath.Join(dir, "stable.db"), []byte("term 2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Restore(dir, cp, isSeg); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string]string{"1.seg": "a", "2.seg": "<none>", "stable.db": "term 2"} {
		if got := read(name); got != want {
			t.Errorf("%s after the restore: %q, want %q", name, got, want)
		}
	}
}

// A checkpoint never interleaves with a change under way: it waits for a
// stalled Sync to return.
func TestCheckpointWaitsForASyncUnderWay(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.OSFS{})
	f, err := fs.OpenFile(filepath.Join(dir, "1.seg"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const d = 200 * time.Millisecond
	fs.StallNextSync(d)
	synced := make(chan struct{}, 1)
	started := time.Now()
	go func() { _ = f.Sync(); synced <- struct{}{} }()
	deadline := time.Now().Add(5 * time.Second)
	for { // poll until the Sync holds the FS (its stall is taken)
		fs.mu.Lock()
		taken := fs.stall == 0
		fs.mu.Unlock()
		if taken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Sync never started")
		}
		time.Sleep(time.Millisecond)
	}
	if err := fs.Checkpoint(dir, filepath.Join(t.TempDir(), "cp"), isSeg); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	<-synced
	// The Sync's own return time is taken after it released the FS, so it
	// does not order against the checkpoint (under load it came 13 µs
	// later); that the checkpoint outlasted the stall is what shows it
	// waited for the Sync.
	if done.Sub(started) < d {
		t.Fatalf("the checkpoint finished %s after the stalled Sync began, before its stall of %s", done.Sub(started), d)
	}
}
