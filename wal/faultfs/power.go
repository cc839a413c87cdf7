package faultfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// The power-loss model (see the package doc): what every file and
// directory written through the FS held at its last successful Sync or
// SyncDir, kept as undo records on the real disk's current state.

// power is the FS's power-loss state.
type power struct {
	// pl is held shared by every operation while it changes the disk or
	// the model, exclusively by PowerLoss: a change either completes
	// before the power goes (and is judged by the model) or finds it gone.
	// It is never held while a Sync waits for its disk.
	pl     sync.RWMutex
	lost   atomic.Bool
	lostCh chan struct{} // closed by PowerLoss: held Syncs return

	// nsmu guards the tree of nodes below and serialises the operations
	// that change names (create, remove, rename, mkdir) with SyncDir.
	nsmu   sync.Mutex
	root   *node
	byPath map[string]*node // every live node by its current real path
	hidden uint64           // names given to entries moved aside
}

// node is a file or directory the FS has touched: its place in the tree
// (parents never change: renames stay within a directory) and, for a file,
// how its contents differ from what was last synced; for a directory, which
// of its names changed since its last SyncDir.
type node struct {
	parent *node
	name   string // current real name in parent ("/" for the root)
	dir    bool
	hidden bool // moved aside: removed, but its removal is not durable yet
	dead   bool // gone from disk for good

	kids map[string]*node // tracked entries by current real name (nsmu)
	// dur holds, for every name of this directory changed since its last
	// SyncDir, the node durably there (nil: none). nsmu.
	dur map[string]*node

	mu       sync.Mutex // the file state below
	size     int64      // the file's size as written through the FS
	synced   int64      // its size at the last successful Sync
	undo     []undoRec  // what each change since then destroyed, in order
	seq      uint64     // the sequence number of the next undo record
	syncedAt uint64     // the mark of the last Sync that made it durable
	pins     map[uint64]syncMark
	pinTok   uint64
}

// undoRec is the bytes a write or truncation overwrote, at off.
type undoRec struct {
	seq uint64
	off int64
	old []byte
}

// syncMark is a Sync under way: the file's size and undo sequence when it
// was called. What it makes durable is the file as it was then.
type syncMark struct {
	seq  uint64
	size int64
}

func (p *power) init() {
	p.lostCh = make(chan struct{})
	p.root = &node{name: "/", dir: true}
	p.byPath = map[string]*node{"/": p.root}
}

// enter starts an operation: it holds pl shared until the caller's
// p.pl.RUnlock, or returns ErrPowerLost (nothing held).
func (p *power) enter() error {
	p.pl.RLock()
	if p.lost.Load() {
		p.pl.RUnlock()
		return ErrPowerLost
	}
	return nil
}

// path returns n's current real path.
func (n *node) path() string {
	if n.parent == nil {
		return n.name
	}
	return filepath.Join(n.parent.path(), n.name)
}

// pin is the size below which a file's bytes must be kept for an undo: the
// largest size a completed or running Sync may make durable. Bytes at or
// above it are cut by PowerLoss anyway. n.mu held.
func (n *node) pin() int64 {
	v := n.synced
	for _, m := range n.pins {
		v = max(v, m.size)
	}
	return v
}

// capture records the bytes [off, off+length) of n that a change is about
// to overwrite, as far as they exist and matter (below pin), reading them
// through r. n.mu held.
func (n *node) capture(r io.ReaderAt, off, length int64) error {
	end := min(off+length, n.size, n.pin())
	if off >= end {
		return nil
	}
	old := make([]byte, end-off)
	if _, err := r.ReadAt(old, off); err != nil {
		return fmt.Errorf("faultfs: read the bytes a write overwrites: %w", err)
	}
	n.undo = append(n.undo, undoRec{seq: n.seq, off: off, old: old})
	n.seq++
	return nil
}

// markSync registers a Sync called now. n.mu held.
func (n *node) markSync() uint64 {
	if n.pins == nil {
		n.pins = map[uint64]syncMark{}
	}
	n.pinTok++
	n.pins[n.pinTok] = syncMark{seq: n.seq, size: n.size}
	return n.pinTok
}

// commitSync makes the file as it was when Sync tok was called its synced
// state (unless a later Sync already did more). n.mu held.
func (n *node) commitSync(tok uint64) {
	m, ok := n.pins[tok]
	delete(n.pins, tok)
	if !ok || m.seq < n.syncedAt {
		return
	}
	n.syncedAt, n.synced = m.seq, m.size
	k := 0
	for k < len(n.undo) && n.undo[k].seq < m.seq {
		k++
	}
	n.undo = append([]undoRec(nil), n.undo[k:]...)
}

// revert puts n's file back as it was at its last successful Sync, on disk:
// the undo records applied newest first, then the size cut to the synced
// one. n.mu held, pl held exclusively.
func (n *node) revert() error {
	defer func() { n.undo, n.pins, n.size = nil, nil, n.synced }()
	if len(n.undo) == 0 && n.size == n.synced {
		return nil
	}
	path := n.path()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("faultfs: power loss: revert %s: %w", path, err)
	}
	for i := len(n.undo) - 1; i >= 0; i-- {
		u := n.undo[i]
		if _, err := f.WriteAt(u.old, u.off); err != nil {
			f.Close()
			return fmt.Errorf("faultfs: power loss: revert %s: %w", path, err)
		}
	}
	if err := f.Truncate(n.synced); err != nil {
		f.Close()
		return fmt.Errorf("faultfs: power loss: revert %s: %w", path, err)
	}
	// The reverted state is written back like any write; it is synced so
	// that it is what the disk holds even if the machine goes next.
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// PowerLoss makes the power go at this instant: every file and directory
// written through f goes back, on the real disk, to its last synced state
// (the package doc lists what that is), and every later operation through
// f or a file opened from it fails with ErrPowerLost and changes nothing. A
// Sync under way returns ErrPowerLost, never success; Syncs held by
// HoldSyncs return at once with it. Changes under way finish first (they
// are then judged like any other); none starts after. PowerLoss may be
// called while Syncs are held. A second call returns ErrPowerLost. An error
// is an IO error of the revert itself: the disk is then not a legal
// post-crash state.
func (f *FS) PowerLoss() error {
	p := &f.power
	p.pl.Lock()
	defer p.pl.Unlock()
	if p.lost.Load() {
		return ErrPowerLost
	}
	p.lost.Store(true)
	close(p.lostCh)
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	var errs []error
	// File contents first, while every node is where the caller left it;
	// then the names, top down, so that each directory's entries are put
	// back inside a parent already put back (renames stay within a
	// directory, so a directory's revert moves only its own entries).
	for _, n := range p.nodes() {
		if !n.dir {
			n.mu.Lock()
			if err := n.revert(); err != nil {
				errs = append(errs, err)
			}
			n.mu.Unlock()
		}
	}
	queue := []*node{p.root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if d.dead {
			continue
		}
		if err := p.revertNames(d); err != nil {
			errs = append(errs, err)
		}
		for _, k := range sortedKids(d) {
			if k.dir {
				queue = append(queue, k)
			}
		}
	}
	return errors.Join(errs...)
}

// Lost reports whether PowerLoss was called.
func (f *FS) Lost() bool { return f.power.lost.Load() }

// Pending is what a power loss at this instant would undo.
type Pending struct {
	// Files is how many files differ from their last synced state.
	Files int
	// Bytes is how many bytes the loss would write back or cut: the bytes
	// overwritten since each file's last Sync (counted once per write) and
	// the bytes past its synced size.
	Bytes int64
	// Entries is how many directory entries (names) changed since their
	// directory's last SyncDir.
	Entries int
}

// Unsynced reports what a power loss at this instant would undo.
func (f *FS) Unsynced() Pending {
	p := &f.power
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	var out Pending
	for _, n := range p.nodes() {
		if n.dir {
			out.Entries += len(n.dur)
			continue
		}
		n.mu.Lock()
		if len(n.undo) > 0 || n.size != n.synced {
			out.Files++
			for _, u := range n.undo {
				out.Bytes += int64(len(u.old))
			}
			out.Bytes += max(n.size-n.synced, 0)
		}
		n.mu.Unlock()
	}
	return out
}

// nodes returns every live node, parents before children. nsmu held.
func (p *power) nodes() []*node {
	out := []*node{p.root}
	for i := 0; i < len(out); i++ {
		out = append(out, sortedKids(out[i])...)
	}
	return out
}

func sortedKids(d *node) []*node {
	names := make([]string, 0, len(d.kids))
	for name := range d.kids {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*node, len(names))
	for i, name := range names {
		out[i] = d.kids[name]
	}
	return out
}
