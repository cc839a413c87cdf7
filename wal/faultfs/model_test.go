package faultfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/wal/vfs"
)

// The reference model of an honest disk, as naive as it gets: every inode
// keeps a full copy of its current and of its durable contents (a file's
// bytes, a directory's entries), a Sync copies the one to the other, and
// after the power loss the disk must be exactly the durable tree.
type refIno struct {
	dir      bool
	cur, dur []byte
	ents     map[string]*refIno // a directory's current entries
	durEnts  map[string]*refIno // its durable entries
}

func newRefDir() *refIno {
	return &refIno{dir: true, ents: map[string]*refIno{}, durEnts: map[string]*refIno{}}
}

// durableTree lists what d durably holds as tree does, under prefix.
func (d *refIno) durableTree(prefix string, out *[]string) {
	for name, n := range d.durEnts {
		p := prefix + name
		if n.dir {
			*out = append(*out, p+"/")
			n.durableTree(p+"/", out)
			continue
		}
		*out = append(*out, p+"="+string(n.dur))
	}
}

func put(b []byte, off int, p []byte) []byte {
	if need := off + len(p); need > len(b) {
		b = append(b, make([]byte, need-len(b))...)
	}
	copy(b[off:], p)
	return b
}

func resize(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size:size]
	}
	return append(b, make([]byte, size-len(b))...)
}

// refRun is one random run: the FS under test and the reference side by
// side.
type refRun struct {
	t    *testing.T
	rng  *rand.Rand
	fs   *FS
	dir  string
	root *refIno
	log  []string
	open []refHandle
}

type refHandle struct {
	ino *refIno
	f   vfs.File
}

var (
	refFiles = []string{"f0", "f1", "f2"}
	refDirs  = []string{"d0", "d1"}
)

func (r *refRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nops:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.log, "\n  "))
}

func (r *refRun) note(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *refRun) must(err error) {
	r.t.Helper()
	if err != nil {
		r.fail("%v", err)
	}
}

// dirs returns the directories that exist now, with their paths relative
// to the run's root.
func (r *refRun) dirs() (rels []string, inos []*refIno) {
	rels, inos = []string{"."}, []*refIno{r.root}
	for _, name := range refDirs {
		if d := r.root.ents[name]; d != nil {
			rels, inos = append(rels, name), append(inos, d)
		}
	}
	return rels, inos
}

// entry picks an existing entry of a directory: its directory's path and
// inode, its name and inode; ok false when the pick found nothing.
func (r *refRun) entry(wantDir bool) (drel string, d *refIno, name string, n *refIno, ok bool) {
	rels, inos := r.dirs()
	k := r.rng.IntN(len(rels))
	drel, d = rels[k], inos[k]
	var names []string
	for name, n := range d.ents {
		if n.dir == wantDir {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", nil, "", nil, false
	}
	sort.Strings(names)
	name = names[r.rng.IntN(len(names))]
	return drel, d, name, d.ents[name], true
}

func (r *refRun) path(drel, name string) string { return filepath.Join(r.dir, drel, name) }

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}

// seed puts files and a directory on disk before the FS sees them: durable
// as found.
func (r *refRun) seed() {
	if r.rng.IntN(2) == 0 {
		b := randBytes(r.rng, 1+r.rng.IntN(6))
		r.must(os.WriteFile(r.path(".", "f0"), b, 0o600))
		n := &refIno{cur: b, dur: append([]byte(nil), b...)}
		r.root.ents["f0"], r.root.durEnts["f0"] = n, n
		r.note("seed f0 %q", b)
	}
	if r.rng.IntN(2) == 0 {
		r.must(os.Mkdir(r.path(".", "d0"), 0o700))
		d := newRefDir()
		r.root.ents["d0"], r.root.durEnts["d0"] = d, d
		b := randBytes(r.rng, 1+r.rng.IntN(6))
		r.must(os.WriteFile(r.path("d0", "f1"), b, 0o600))
		n := &refIno{cur: b, dur: append([]byte(nil), b...)}
		d.ents["f1"], d.durEnts["f1"] = n, n
		r.note("seed d0/f1 %q", b)
	}
}

// step does one random operation on both sides.
func (r *refRun) step() {
	rng := r.rng
	switch op := rng.IntN(12); op {
	case 0, 1: // create a file
		rels, inos := r.dirs()
		k := rng.IntN(len(rels))
		name := refFiles[rng.IntN(len(refFiles))]
		if inos[k].ents[name] != nil {
			return
		}
		r.note("create %s/%s", rels[k], name)
		f, err := r.fs.OpenFile(r.path(rels[k], name), os.O_CREATE|os.O_RDWR, 0o600)
		r.must(err)
		n := &refIno{}
		inos[k].ents[name] = n
		r.keep(n, f)
	case 2, 3: // write through a new handle or one kept open
		n, f, how := r.handle()
		if n == nil {
			return
		}
		b := randBytes(rng, 1+rng.IntN(6))
		off := rng.IntN(len(n.cur) + 4)
		r.note("write %q at %d (%s)", b, off, how)
		_, err := f.WriteAt(b, int64(off))
		r.must(err)
		n.cur = put(n.cur, off, b)
	case 4: // truncate
		n, f, how := r.handle()
		if n == nil {
			return
		}
		size := rng.IntN(len(n.cur) + 4)
		r.note("truncate to %d (%s)", size, how)
		r.must(f.Truncate(int64(size)))
		n.cur = resize(n.cur, size)
	case 5, 6: // sync a file
		n, f, how := r.handle()
		if n == nil {
			return
		}
		r.note("sync (%s)", how)
		r.must(f.Sync())
		n.dur = append([]byte(nil), n.cur...)
	case 7: // remove a file or a directory
		drel, d, name, _, ok := r.entry(rng.IntN(3) == 0)
		if !ok {
			return
		}
		r.note("remove %s/%s", drel, name)
		if d.ents[name].dir {
			r.must(r.fs.RemoveAll(r.path(drel, name)))
		} else {
			r.must(r.fs.Remove(r.path(drel, name)))
		}
		delete(d.ents, name)
	case 8: // rename within a directory
		isDir := rng.IntN(3) == 0
		drel, d, name, n, ok := r.entry(isDir)
		if !ok {
			return
		}
		names := refFiles
		if isDir {
			names = refDirs
		}
		to := names[rng.IntN(len(names))]
		if to == name {
			return
		}
		if t := d.ents[to]; t != nil && t.dir && len(t.ents) > 0 {
			return // rename(2) refuses a non-empty target
		}
		r.note("rename %s/%s to %s", drel, name, to)
		r.must(r.fs.Rename(r.path(drel, name), r.path(drel, to)))
		d.ents[to] = n
		delete(d.ents, name)
	case 9: // make a directory
		name := refDirs[rng.IntN(len(refDirs))]
		if r.root.ents[name] != nil {
			return
		}
		r.note("mkdir %s", name)
		r.must(r.fs.Mkdir(r.path(".", name), 0o700))
		r.root.ents[name] = newRefDir()
	case 10, 11: // sync a directory
		rels, inos := r.dirs()
		k := rng.IntN(len(rels))
		r.note("syncdir %s", rels[k])
		r.must(r.fs.SyncDir(r.path(rels[k], "")))
		inos[k].durEnts = map[string]*refIno{}
		for name, n := range inos[k].ents {
			inos[k].durEnts[name] = n
		}
	}
}

// handle returns a file to write through: one kept open (possibly of a
// file since removed or renamed), or a file opened now (and kept open).
func (r *refRun) handle() (*refIno, vfs.File, string) {
	if len(r.open) > 0 && r.rng.IntN(2) == 0 {
		k := r.rng.IntN(len(r.open))
		return r.open[k].ino, r.open[k].f, "handle " + strconv.Itoa(k)
	}
	drel, _, name, n, ok := r.entry(false)
	if !ok {
		return nil, nil, ""
	}
	flag := os.O_RDWR
	if r.rng.IntN(4) == 0 {
		flag |= os.O_TRUNC
	}
	f, err := r.fs.OpenFile(r.path(drel, name), flag, 0)
	r.must(err)
	if flag&os.O_TRUNC != 0 {
		n.cur = nil
	}
	r.keep(n, f)
	return n, f, fmt.Sprintf("open %s/%s trunc=%v as handle %d", drel, name, flag&os.O_TRUNC != 0, len(r.open)-1)
}

// keep keeps f open for later writes, closing the oldest beyond four.
func (r *refRun) keep(n *refIno, f vfs.File) {
	r.open = append(r.open, refHandle{n, f})
	if len(r.open) > 4 {
		r.must(r.open[0].f.Close())
		r.open = r.open[1:]
	}
}

// A seeded random sequence of writes, truncations, syncs, creations,
// removals, renames, directory creations and directory syncs, then a power
// loss: the disk must hold exactly what the reference model says is
// durable. FAULTFS_SEED replays one run.
func TestPowerLossMatchesReferenceModel(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	runs := 120
	if s := os.Getenv("FAULTFS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		base, runs = v, 1
	}
	t.Logf("seed %d (FAULTFS_SEED=%d replays the first run; run i uses seed+i)", base, base)
	for i := range runs {
		seed := base + uint64(i)
		r := &refRun{t: t, rng: rand.New(rand.NewPCG(seed, 0)), fs: New(vfs.OSFS{}), dir: t.TempDir(), root: newRefDir()}
		r.note("seed %d", seed)
		r.seed()
		steps := 10 + r.rng.IntN(50)
		for range steps {
			r.step()
		}
		r.must(r.fs.PowerLoss())
		for _, h := range r.open {
			_ = h.f.Close()
		}
		var want []string
		r.root.durableTree("", &want)
		sort.Strings(want)
		got := tree(t, r.dir)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			r.fail("seed %d: after the power loss the disk holds\n  %q\nthe reference model says\n  %q", seed, got, want)
		}
	}
}
