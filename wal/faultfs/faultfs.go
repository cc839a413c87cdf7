package faultfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobraft/jobraft/wal/vfs"
)

// FS wraps a wal.FS over the real disk and injects the faults of a failing
// disk: write errors, short writes, fsync errors, a full disk, stalled or
// held Syncs; it models an honest power loss (PowerLoss, see the package
// doc). It is safe for concurrent use and can be reconfigured at any time.
// Tests of every package use it; it is never used by default.
type FS struct {
	inner vfs.FS

	// ops is held shared by every call that changes what is on disk
	// (writes, syncs, truncations, creations, removals, renames) for its
	// whole length, and exclusively by Checkpoint: no change interleaves
	// with a checkpoint's copy.
	ops sync.RWMutex

	mu         sync.Mutex
	writeErr   error
	syncErr    error
	shortWrite bool
	space      int64 // bytes left before ENOSPC; < 0 means unlimited
	syncs      int
	stall      time.Duration // the next Sync's extra latency, once
	hold       chan struct{} // while not nil, a Sync waits for it to close
	held       int           // Syncs waiting on hold

	power power // the power-loss model (power.go, names.go)

	changes    atomic.Int64 // changes of the disk attempted (at.go)
	lossAt     atomic.Int64 // the change PowerLossAt armed a loss before; 0: none
	lostBefore string       // mu: the change it went before
	lossErr    error        // mu: PowerLoss's error then
}

var _ vfs.DirFS = (*FS)(nil)

// New returns an FS over inner with no faults armed.
func New(inner vfs.FS) *FS {
	f := &FS{inner: inner, space: -1}
	f.power.init()
	return f
}

// FailWrites makes every following write fail with err (nil disarms).
func (f *FS) FailWrites(err error) { f.mu.Lock(); f.writeErr = err; f.mu.Unlock() }

// FailSyncs makes every following Sync fail with err (nil disarms).
func (f *FS) FailSyncs(err error) { f.mu.Lock(); f.syncErr = err; f.mu.Unlock() }

// StallNextSync makes the next Sync take d longer, once (a disk that
// stalls; 0 disarms).
func (f *FS) StallNextSync(d time.Duration) { f.mu.Lock(); f.stall = d; f.mu.Unlock() }

// HoldSyncs makes every following Sync wait, before it syncs, until
// release is called (a disk whose flush does not return yet). release may
// be called more than once.
func (f *FS) HoldSyncs() (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	f.mu.Lock()
	f.hold = ch
	f.mu.Unlock()
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.hold == ch {
				f.hold = nil
			}
			f.mu.Unlock()
			close(ch)
		})
	}
}

// HeldSyncs returns how many Syncs are waiting for a HoldSyncs release.
func (f *FS) HeldSyncs() int { f.mu.Lock(); defer f.mu.Unlock(); return f.held }

// ShortWrites makes every following write write half its bytes and fail
// with io.ErrShortWrite.
func (f *FS) ShortWrites(on bool) { f.mu.Lock(); f.shortWrite = on; f.mu.Unlock() }

// LimitSpace leaves n more bytes of space; writes beyond fail with ENOSPC
// after writing what fits. n < 0 removes the limit.
func (f *FS) LimitSpace(n int64) { f.mu.Lock(); f.space = n; f.mu.Unlock() }

// Syncs returns how many Sync calls succeeded.
func (f *FS) Syncs() int { f.mu.Lock(); defer f.mu.Unlock(); return f.syncs }

// OpenFile implements wal.FS. A file it creates is durable after a
// SyncDir of its directory; a file opened for writing only is opened for
// reading and writing underneath (the power-loss model reads the bytes a
// write overwrites), and refuses reads as the real one would (EBADF).
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_CREATE|os.O_WRONLY|os.O_RDWR) != 0 {
		f.mu.Lock()
		err := f.writeErr
		f.mu.Unlock()
		if err != nil && flag&os.O_CREATE != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	if flag&os.O_CREATE != 0 || flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		f.change("create", name)
	}
	if flag&os.O_CREATE != 0 {
		f.ops.RLock()
		defer f.ops.RUnlock()
	}
	p := &f.power
	path, err := f.enterPath("open", name)
	if err != nil {
		return nil, err
	}
	defer p.pl.RUnlock()
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	n, err := p.ensure(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	iflag := flag &^ os.O_TRUNC
	if acc == os.O_WRONLY {
		iflag = iflag&^os.O_WRONLY | os.O_RDWR
	}
	inner, err := f.inner.OpenFile(name, iflag, perm)
	if err != nil {
		return nil, err
	}
	if n == nil { // created now
		d, err := p.ensure(filepath.Dir(path))
		if err != nil || d == nil {
			inner.Close()
			return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("faultfs: its directory: %v", err)}
		}
		p.changed(d, filepath.Base(path))
		n = &node{parent: d, name: filepath.Base(path)}
		p.attach(n)
	}
	ff := &faultFile{File: inner, fs: f, node: n, acc: acc, app: flag&os.O_APPEND != 0}
	if flag&os.O_TRUNC != 0 && acc != 0 {
		if err := ff.truncate(0); err != nil {
			inner.Close()
			return nil, err
		}
	}
	return ff, nil
}

// A lying disk acknowledges every fsync while the data sits in a volatile
// cache, and loses what it cached when the power goes. Checkpoint and
// Restore are its two halves, for a harness that owns the process: from a
// Checkpoint on, the disk "lies" (nothing changes in how the FS behaves:
// writes reach the page cache and fsyncs succeed, as they would), and at
// the power loss the harness kills the process and Restores the checkpoint,
// so everything written since is gone. The page cache survives a SIGKILL;
// the loss has to be made by whoever killed the process.

// Checkpoint copies every regular file of dir whose name keep accepts into
// dst (removed first, then created), while no write, sync, truncation,
// creation, removal or rename through f is under way: the copy is a state
// dir could be found in after a crash at that instant (every write made so
// far whole, the log's batches whole). Only the files named by keep are
// copied: a member's stable store in the same directory, written outside
// f, keeps its own durability.
func (f *FS) Checkpoint(dir, dst string, keep func(name string) bool) error {
	f.ops.Lock()
	defer f.ops.Unlock()
	if err := f.power.enter(); err != nil {
		return fmt.Errorf("faultfs: checkpoint: %w", err)
	}
	defer f.power.pl.RUnlock()
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	return copyFiles(dir, dst, keep)
}

// Restore replaces the files of dir that keep accepts by those of src (a
// Checkpoint): the power loss of a lying disk. The process writing dir must
// not run.
func Restore(dir, src string, keep func(name string) bool) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("faultfs: restore: no checkpoint: %w", err)
	}
	names, err := vfs.OSFS{}.ReadDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if keep(n) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return copyFiles(src, dir, keep)
}

// copyFiles copies the regular files of from that keep accepts into to.
func copyFiles(from, to string, keep func(name string) bool) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || reserved(e.Name()) || !keep(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
