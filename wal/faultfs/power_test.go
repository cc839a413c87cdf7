package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/wal/vfs"
)

// pl is one power-loss test: an FS over a fresh directory and helpers that
// fail the test on any error.
type pl struct {
	t   *testing.T
	fs  *FS
	dir string
}

func newPL(t *testing.T) *pl {
	return &pl{t: t, fs: New(vfs.OSFS{}), dir: t.TempDir()}
}

func (h *pl) path(name string) string { return filepath.Join(h.dir, name) }

func (h *pl) open(name string, flag int) vfs.File {
	h.t.Helper()
	f, err := h.fs.OpenFile(h.path(name), flag, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	return f
}

func (h *pl) create(name string) vfs.File { return h.open(name, os.O_CREATE|os.O_RDWR) }

func (h *pl) writeAt(f vfs.File, off int64, s string) {
	h.t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pl) sync(f vfs.File) {
	h.t.Helper()
	if err := f.Sync(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pl) syncDir(name string) {
	h.t.Helper()
	if err := h.fs.SyncDir(h.path(name)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pl) do(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// synced creates name holding s, durable (file and directory synced).
func (h *pl) synced(name, s string) vfs.File {
	h.t.Helper()
	f := h.create(name)
	h.writeAt(f, 0, s)
	h.sync(f)
	h.syncDir(filepath.Dir(name))
	return f
}

func (h *pl) powerLoss() {
	h.t.Helper()
	if err := h.fs.PowerLoss(); err != nil {
		h.t.Fatal(err)
	}
}

// tree returns every entry under dir, read with the os package: files as
// "path=contents", directories as "path/".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out = append(out, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, rel+"="+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func (h *pl) want(entries ...string) {
	h.t.Helper()
	sort.Strings(entries)
	got := tree(h.t, h.dir)
	if strings.Join(got, "|") != strings.Join(entries, "|") {
		h.t.Fatalf("after the power loss the directory holds\n  %q\nwant\n  %q", got, entries)
	}
}

// Each case does some changes, loses the power, and says what the disk
// must hold: what was synced, nothing else.
func TestPowerLossKeepsExactlyWhatWasSynced(t *testing.T) {
	cases := []struct {
		name string
		run  func(h *pl)
		want []string
	}{
		{"created and synced, directory not synced: gone", func(h *pl) {
			f := h.create("a")
			h.writeAt(f, 0, "data")
			h.sync(f)
		}, nil},
		{"created, directory synced, data not synced: empty", func(h *pl) {
			f := h.create("a")
			h.syncDir(".")
			h.writeAt(f, 0, "data")
		}, []string{"a="}},
		{"created, data and directory synced: kept", func(h *pl) {
			h.synced("a", "data")
		}, []string{"a=data"}},
		{"directory synced before the data was written, data synced: kept", func(h *pl) {
			f := h.create("a")
			h.syncDir(".")
			h.writeAt(f, 0, "data")
			h.sync(f)
		}, []string{"a=data"}},
		{"overwrite not synced: old bytes back", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.writeAt(f, 2, "XY")
		}, []string{"a=abcdef"}},
		{"overwrites of one region twice, not synced: the synced bytes back", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.writeAt(f, 1, "XYZ")
			h.writeAt(f, 2, "QQQQ")
			h.writeAt(f, 0, "R")
		}, []string{"a=abcdef"}},
		{"extension not synced: cut to the synced size", func(h *pl) {
			f := h.synced("a", "abc")
			h.writeAt(f, 3, "def")
			h.writeAt(f, 10, "far")
		}, []string{"a=abc"}},
		{"overwrite and extension synced, then more not synced", func(h *pl) {
			f := h.synced("a", "abc")
			h.writeAt(f, 1, "XYZW")
			h.sync(f)
			h.writeAt(f, 0, "0123456789")
		}, []string{"a=aXYZW"}},
		{"a Sync through another handle syncs the file", func(h *pl) {
			f := h.synced("a", "abc")
			h.writeAt(f, 0, "xyz")
			g := h.open("a", os.O_RDONLY)
			h.sync(g)
			h.do(g.Close())
			h.writeAt(f, 0, "000")
		}, []string{"a=xyz"}},
		{"truncation not synced: bytes back", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.do(f.Truncate(2))
		}, []string{"a=abcdef"}},
		{"truncation synced: cut", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.do(f.Truncate(2))
			h.sync(f)
		}, []string{"a=ab"}},
		{"truncation, then extension past a hole, not synced", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.do(f.Truncate(1))
			h.writeAt(f, 4, "ZZZZ")
			h.do(f.Truncate(12))
		}, []string{"a=abcdef"}},
		{"truncation synced, then regrown with other bytes, not synced", func(h *pl) {
			f := h.synced("a", "abcdef")
			h.do(f.Truncate(3))
			h.sync(f)
			h.writeAt(f, 3, "XYZ")
		}, []string{"a=abc"}},
		{"removal not dir-synced: back with its synced contents", func(h *pl) {
			f := h.synced("a", "abc")
			h.writeAt(f, 0, "XYZ")
			h.do(f.Close())
			h.do(h.fs.Remove(h.path("a")))
			names, err := h.fs.ReadDirNames(h.dir)
			h.do(err)
			if len(names) != 0 {
				h.t.Fatalf("a removed file is listed: %q", names)
			}
			if _, err := h.fs.OpenFile(h.path("a"), os.O_RDONLY, 0); !os.IsNotExist(err) {
				h.t.Fatalf("a removed file opens: %v", err)
			}
		}, []string{"a=abc"}},
		{"removal dir-synced: gone", func(h *pl) {
			h.synced("a", "abc")
			h.do(h.fs.Remove(h.path("a")))
			h.syncDir(".")
		}, nil},
		{"removed, then created again with other data synced, directory not synced: the old one", func(h *pl) {
			h.synced("a", "old")
			h.do(h.fs.Remove(h.path("a")))
			f := h.create("a")
			h.writeAt(f, 0, "new")
			h.sync(f)
		}, []string{"a=old"}},
		{"rename not dir-synced: undone", func(h *pl) {
			h.synced("a", "abc")
			h.do(h.fs.Rename(h.path("a"), h.path("b")))
		}, []string{"a=abc"}},
		{"rename dir-synced: done", func(h *pl) {
			h.synced("a", "abc")
			h.do(h.fs.Rename(h.path("a"), h.path("b")))
			h.syncDir(".")
		}, []string{"b=abc"}},
		{"rename over a durable file, not dir-synced: both back", func(h *pl) {
			h.synced("a", "A")
			h.synced("b", "B")
			h.do(h.fs.Rename(h.path("a"), h.path("b")))
		}, []string{"a=A", "b=B"}},
		{"rename over a durable file, dir-synced", func(h *pl) {
			h.synced("a", "A")
			h.synced("b", "B")
			h.do(h.fs.Rename(h.path("a"), h.path("b")))
			h.syncDir(".")
		}, []string{"b=A"}},
		{"renames back and forth, swapping names, not dir-synced", func(h *pl) {
			h.synced("a", "A")
			h.synced("b", "B")
			h.do(h.fs.Rename(h.path("a"), h.path("c")))
			h.do(h.fs.Rename(h.path("b"), h.path("a")))
			h.do(h.fs.Rename(h.path("c"), h.path("b")))
		}, []string{"a=A", "b=B"}},
		{"new file renamed into place, file synced, directory not: the old one", func(h *pl) {
			h.synced("cur", "v1")
			f := h.create("cur.tmp")
			h.writeAt(f, 0, "v2")
			h.sync(f)
			h.do(h.fs.Rename(h.path("cur.tmp"), h.path("cur")))
		}, []string{"cur=v1"}},
		{"directory created, file in it synced with its directory, parent not synced: all gone", func(h *pl) {
			h.do(h.fs.MkdirAll(h.path("d/e"), 0o700))
			f := h.create("d/e/a")
			h.writeAt(f, 0, "x")
			h.sync(f)
			h.syncDir("d/e")
			h.syncDir("d")
		}, nil},
		{"directory chain created and each parent synced: kept", func(h *pl) {
			h.do(h.fs.MkdirAll(h.path("d/e"), 0o700))
			h.synced("d/e/a", "x")
			h.syncDir("d")
			h.syncDir(".")
		}, []string{"d/", "d/e/", "d/e/a=x"}},
		{"directory removed with everything in it, not dir-synced: back", func(h *pl) {
			h.do(h.fs.Mkdir(h.path("d"), 0o700))
			h.syncDir(".")
			f := h.synced("d/a", "x")
			h.writeAt(f, 0, "y")
			h.do(h.fs.RemoveAll(h.path("d")))
		}, []string{"d/", "d/a=x"}},
		{"directory renamed, not dir-synced: back, with what was synced inside", func(h *pl) {
			h.do(h.fs.Mkdir(h.path("d.tmp"), 0o700))
			h.syncDir(".")
			h.synced("d.tmp/a", "x")
			h.create("d.tmp/b") // not dir-synced inside: gone
			h.do(h.fs.Rename(h.path("d.tmp"), h.path("d")))
		}, []string{"d.tmp/", "d.tmp/a=x"}},
		{"directory renamed and dir-synced, a file in it not: renamed, without it", func(h *pl) {
			h.do(h.fs.Mkdir(h.path("d.tmp"), 0o700))
			h.synced("d.tmp/a", "x")
			h.create("d.tmp/b")
			h.do(h.fs.Rename(h.path("d.tmp"), h.path("d")))
			h.syncDir(".")
		}, []string{"d/", "d/a=x"}},
		{"O_TRUNC not synced: contents back", func(h *pl) {
			h.synced("a", "abc")
			f := h.open("a", os.O_RDWR|os.O_TRUNC)
			h.writeAt(f, 0, "z")
		}, []string{"a=abc"}},
		{"appends through O_APPEND and sequential writes", func(h *pl) {
			f := h.open("a", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
			h.syncDir(".")
			_, err := f.Write([]byte("ab"))
			h.do(err)
			h.sync(f)
			_, err = f.Write([]byte("cd"))
			h.do(err)
			g := h.open("b", os.O_CREATE|os.O_WRONLY)
			h.syncDir(".")
			_, err = g.Write([]byte("123"))
			h.do(err)
			_, err = g.Write([]byte("45"))
			h.do(err)
			h.sync(g)
			_, err = g.Write([]byte("6"))
			h.do(err)
		}, []string{"a=ab", "b=12345"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newPL(t)
			c.run(h)
			h.powerLoss()
			h.want(c.want...)
		})
	}
}

// Files the FS finds on disk are taken as durable as found: a fresh FS
// over a directory an earlier process wrote.
func TestPowerLossTrustsWhatItFound(t *testing.T) {
	h := newPL(t)
	h.do(os.MkdirAll(h.path("d"), 0o700))
	h.do(os.WriteFile(h.path("d/old"), []byte("old"), 0o600))
	h.do(os.WriteFile(h.path("keep"), []byte("k"), 0o600))
	f := h.open("keep", os.O_RDWR)
	h.writeAt(f, 0, "changed")
	h.do(h.fs.RemoveAll(h.path("d")))
	h.powerLoss()
	h.want("d/", "d/old=old", "keep=k")
}

// After the power loss every operation fails with ErrPowerLost and changes
// nothing on disk.
func TestAfterPowerLossEverythingFails(t *testing.T) {
	h := newPL(t)
	f := h.synced("a", "abc")
	h.do(h.fs.Mkdir(h.path("d"), 0o700))
	h.syncDir(".")
	h.powerLoss()
	before := tree(t, h.dir)
	_, openErr := h.fs.OpenFile(h.path("new"), os.O_CREATE|os.O_RDWR, 0o600)
	_, readOpenErr := h.fs.OpenFile(h.path("a"), os.O_RDONLY, 0)
	_, writeErr := f.WriteAt([]byte("x"), 0)
	_, appendErr := f.Write([]byte("x"))
	_, readErr := f.ReadAt(make([]byte, 1), 0)
	_, sizeErr := f.Size()
	_, listErr := h.fs.ReadDirNames(h.dir)
	errs := map[string]error{
		"OpenFile create": openErr,
		"OpenFile read":   readOpenErr,
		"WriteAt":         writeErr,
		"Write":           appendErr,
		"ReadAt":          readErr,
		"Size":            sizeErr,
		"ReadDirNames":    listErr,
		"Sync":            f.Sync(),
		"Truncate":        f.Truncate(0),
		"Remove":          h.fs.Remove(h.path("a")),
		"RemoveAll":       h.fs.RemoveAll(h.path("d")),
		"Rename":          h.fs.Rename(h.path("a"), h.path("b")),
		"Mkdir":           h.fs.Mkdir(h.path("e"), 0o700),
		"MkdirAll":        h.fs.MkdirAll(h.path("e/f"), 0o700),
		"SyncDir":         h.fs.SyncDir(h.dir),
		"Checkpoint":      h.fs.Checkpoint(h.dir, filepath.Join(t.TempDir(), "cp"), func(string) bool { return true }),
		"PowerLoss":       h.fs.PowerLoss(),
		"Close":           f.Close(),
	}
	for op, err := range errs {
		if !errors.Is(err, ErrPowerLost) {
			t.Errorf("%s after the power loss: %v, want ErrPowerLost", op, err)
		}
	}
	if after := tree(t, h.dir); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Fatalf("operations after the power loss changed the disk: %q, was %q", after, before)
	}
	if !h.fs.Lost() {
		t.Fatal("Lost is false after PowerLoss")
	}
}

// Unsynced counts what a loss would undo, and a Sync or SyncDir clears it.
func TestUnsyncedCountsWhatALossUndoes(t *testing.T) {
	h := newPL(t)
	f := h.synced("a", "abcdef")
	if got := h.fs.Unsynced(); got != (Pending{}) {
		t.Fatalf("after syncs: %+v, want nothing", got)
	}
	h.writeAt(f, 4, "XYZW") // 2 overwritten, 2 past the synced size
	g := h.create("b")
	if got, want := h.fs.Unsynced(), (Pending{Files: 1, Bytes: 4, Entries: 1}); got != want {
		t.Fatalf("after a write and a creation: %+v, want %+v", got, want)
	}
	h.sync(f)
	h.sync(g)
	h.syncDir(".")
	if got := h.fs.Unsynced(); got != (Pending{}) {
		t.Fatalf("after syncs: %+v, want nothing", got)
	}
}

// Names beginning with the prefix of entries moved aside are refused.
func TestReservedNamesRefused(t *testing.T) {
	h := newPL(t)
	h.synced("a", "x")
	if _, err := h.fs.OpenFile(h.path(".faultfs-0"), os.O_CREATE|os.O_RDWR, 0o600); !errors.Is(err, ErrReservedName) {
		t.Errorf("create: %v, want ErrReservedName", err)
	}
	if err := h.fs.Rename(h.path("a"), h.path(".faultfs-1")); !errors.Is(err, ErrReservedName) {
		t.Errorf("rename: %v, want ErrReservedName", err)
	}
	if err := h.fs.Rename(h.path("a"), h.path("sub/a")); !errors.Is(err, ErrCrossDir) {
		t.Errorf("rename across directories: %v, want ErrCrossDir", err)
	}
	h.want("a=x")
}

// PowerLossAt loses the power just before the n-th change from when it was
// armed: that change fails, the ones before it are judged by the model.
func TestPowerLossAtLosesBeforeTheNthChange(t *testing.T) {
	h := newPL(t)
	h.synced("a", "old") // changes 1-4: create, write, sync, syncdir
	if got := h.fs.Changes(); got != 4 {
		t.Fatalf("%d changes counted, want 4", got)
	}
	h.fs.PowerLossAt(3)
	f := h.open("a", os.O_RDWR) // not a change
	h.writeAt(f, 0, "new")      // change 1
	h.do(h.fs.Mkdir(h.path("d"), 0o700))
	if err := f.Sync(); !errors.Is(err, ErrPowerLost) { // change 3
		t.Fatalf("the third change: %v, want ErrPowerLost", err)
	}
	what, err := h.fs.LostBefore()
	if err != nil || what != "change 7: sync a" {
		t.Fatalf("LostBefore: %q, %v; want the sync, the 7th change", what, err)
	}
	h.want("a=old")
}

// A process killed before a SyncDir removed what it moved aside leaves
// that entry on disk; the next FS over the directory moves its own
// removals aside under other names (chaos: a member restarted twice
// exited at start, its snapshot store's removal of a leftover refused
// with "file exists").
func TestHideSkipsLeftoversOfAnEarlierProcess(t *testing.T) {
	h := newPL(t)
	for _, d := range []string{"gone", hiddenPrefix + "0", hiddenPrefix + "1"} {
		if err := os.Mkdir(h.path(d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h.syncDir("")
	if err := h.fs.Remove(h.path("gone")); err != nil {
		t.Fatalf("remove with leftovers of an earlier process: %v", err)
	}
	if _, err := os.Stat(h.path(hiddenPrefix + "2")); err != nil {
		t.Fatalf("the removal is not moved aside under a free name: %v", err)
	}
}
