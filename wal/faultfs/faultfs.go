// Package faultfs is a wal.FS that injects the faults of a failing disk
// (write errors, short writes, fsync errors, a full disk) for tests. It is a
// separate package so that no host binary links it; a log takes it through
// wal.WithFS.
package faultfs

import (
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/wal"
)

// FS wraps a wal.FS and injects the faults of a failing disk: write
// errors, short writes, fsync errors and a full disk. It is safe for
// concurrent use and can be reconfigured at any time. Tests of every package
// use it; it is never used by default.
type FS struct {
	inner wal.FS

	mu         sync.Mutex
	writeErr   error
	syncErr    error
	shortWrite bool
	space      int64 // bytes left before ENOSPC; < 0 means unlimited
	syncs      int
	stall      time.Duration // the next Sync's extra latency, once
	hold       chan struct{} // while not nil, a Sync waits for it to close
	held       int           // Syncs waiting on hold
}

// New returns an FS over inner with no faults armed.
func New(inner wal.FS) *FS { return &FS{inner: inner, space: -1} }

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

// OpenFile implements wal.FS.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if flag&(os.O_CREATE|os.O_WRONLY|os.O_RDWR) != 0 {
		f.mu.Lock()
		err := f.writeErr
		f.mu.Unlock()
		if err != nil && flag&os.O_CREATE != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	inner, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: inner, fs: f}, nil
}

// Remove implements wal.FS.
func (f *FS) Remove(name string) error { return f.inner.Remove(name) }

// Rename implements wal.FS.
func (f *FS) Rename(o, n string) error { return f.inner.Rename(o, n) }

// ReadDirNames implements wal.FS.
func (f *FS) ReadDirNames(dir string) ([]string, error) { return f.inner.ReadDirNames(dir) }

// MkdirAll implements wal.FS.
func (f *FS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// SyncDir implements wal.FS.
func (f *FS) SyncDir(dir string) error {
	f.mu.Lock()
	err := f.syncErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

type faultFile struct {
	wal.File
	fs *FS
}

func (ff *faultFile) Write(p []byte) (int, error) { return ff.faulty(p, ff.File.Write) }

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	return ff.faulty(p, func(b []byte) (int, error) { return ff.File.WriteAt(b, off) })
}

// faulty applies the armed write faults to one write of p done by write.
func (ff *faultFile) faulty(p []byte, write func([]byte) (int, error)) (int, error) {
	f := ff.fs
	f.mu.Lock()
	werr, short, space := f.writeErr, f.shortWrite, f.space
	f.mu.Unlock()
	if werr != nil {
		return 0, &os.PathError{Op: "write", Path: ff.Name(), Err: werr}
	}
	if short {
		n, err := write(p[:len(p)/2])
		if err == nil {
			err = io.ErrShortWrite
		}
		return n, err
	}
	if space >= 0 && int64(len(p)) > space {
		n, err := write(p[:space])
		f.mu.Lock()
		f.space -= int64(n)
		f.mu.Unlock()
		if err == nil {
			err = &os.PathError{Op: "write", Path: ff.Name(), Err: syscall.ENOSPC}
		}
		return n, err
	}
	n, err := write(p)
	if space >= 0 {
		f.mu.Lock()
		f.space -= int64(n)
		f.mu.Unlock()
	}
	return n, err
}

func (ff *faultFile) Sync() error {
	f := ff.fs
	f.mu.Lock()
	if hold := f.hold; hold != nil {
		f.held++
		f.mu.Unlock()
		<-hold
		f.mu.Lock()
		f.held--
	}
	err, delay := f.syncErr, f.stall
	if err == nil {
		f.stall = 0
	}
	f.mu.Unlock()
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: ff.Name(), Err: err}
	}
	if delay > 0 {
		time.Sleep(delay) // the disk's latency, not a wait for state
	}
	if err := ff.File.Sync(); err != nil {
		return err
	}
	f.mu.Lock()
	f.syncs++
	f.mu.Unlock()
	return nil
}
