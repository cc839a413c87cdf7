package faultfs

import (
	"fmt"
	"os"
	"path/filepath"
)

// Losing the power at a chosen instant: every change of the disk through
// the FS (a write, truncation, Sync, creation, removal, rename, directory
// creation or SyncDir, counted when it is attempted) is numbered, and
// PowerLossAt arms a loss just before one of them.

// PowerLossAt arms a power loss just before the n-th change of the disk
// through f from now on (n >= 1; 0 disarms): that change and every later
// operation fail with ErrPowerLost. A harness runs a scenario once to count
// its changes (Changes), then once per change with the loss armed before it.
func (f *FS) PowerLossAt(n int64) {
	if n <= 0 {
		f.lossAt.Store(0)
		return
	}
	f.lossAt.Store(f.changes.Load() + n)
}

// Changes returns how many changes of the disk were attempted through f.
func (f *FS) Changes() int64 { return f.changes.Load() }

// LostBefore describes the change an armed loss (PowerLossAt) went just
// before, and PowerLoss's own error; "" when it has not gone.
func (f *FS) LostBefore() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lostBefore, f.lossErr
}

// change counts a change of the disk about to be attempted, and loses the
// power first when it is the one PowerLossAt armed. It is called before the
// operation takes any lock of the power-loss model.
func (f *FS) change(op, name string) { f.count(op, name, 0, -2) }

// changeWrite is change for a write of size bytes at off (-1: where the
// handle's next Write goes).
func (f *FS) changeWrite(name string, size int, off int64) { f.count("write", name, size, off) }

func (f *FS) count(op, name string, size int, off int64) {
	if f.power.lost.Load() {
		return
	}
	n := f.changes.Add(1)
	if at := f.lossAt.Load(); at == 0 || n != at {
		return
	}
	err := f.PowerLoss()
	what := fmt.Sprintf("change %d: %s %s", n, op, filepath.Base(name))
	switch {
	case off >= 0:
		what = fmt.Sprintf("change %d: write %d bytes at %d of %s", n, size, off, filepath.Base(name))
	case off == -1:
		what = fmt.Sprintf("change %d: write %d bytes to %s", n, size, filepath.Base(name))
	}
	f.mu.Lock()
	f.lostBefore, f.lossErr = what, err
	f.mu.Unlock()
}

// Stat describes name like os.Stat; entries moved aside do not exist.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	p := &f.power
	path, err := f.enterPath("stat", name)
	if err != nil {
		return nil, err
	}
	defer p.pl.RUnlock()
	if reserved(path) {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	return os.Stat(name)
}
