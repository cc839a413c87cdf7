package faultfs

import (
	"io"
	"os"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/wal/vfs"
)

// faultFile is a file opened through an FS: its writes pass the armed
// faults and the power-loss model.
type faultFile struct {
	vfs.File
	fs   *FS
	node *node
	acc  int   // access mode asked for: os.O_RDONLY, os.O_WRONLY or os.O_RDWR
	app  bool  // opened with O_APPEND: Write appends
	off  int64 // where the next Write goes (without O_APPEND); node.mu
}

func (ff *faultFile) lostErr(op string) error {
	return &os.PathError{Op: op, Path: ff.Name(), Err: ErrPowerLost}
}

func (ff *faultFile) Write(p []byte) (int, error) { return ff.faulty(p, 0, true) }

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) { return ff.faulty(p, off, false) }

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.power.enter(); err != nil {
		return 0, ff.lostErr("read")
	}
	defer ff.fs.power.pl.RUnlock()
	if ff.acc == os.O_WRONLY {
		return 0, &os.PathError{Op: "read", Path: ff.Name(), Err: syscall.EBADF}
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultFile) Size() (int64, error) {
	if err := ff.fs.power.enter(); err != nil {
		return 0, ff.lostErr("stat")
	}
	defer ff.fs.power.pl.RUnlock()
	return ff.File.Size()
}

// Close closes the file; after a power loss it still releases the
// descriptor, and says the power is lost.
func (ff *faultFile) Close() error {
	err := ff.File.Close()
	if ff.fs.power.lost.Load() {
		return ff.lostErr("close")
	}
	return err
}

func (ff *faultFile) Truncate(size int64) error {
	ff.fs.change("truncate", ff.Name())
	ff.fs.ops.RLock()
	defer ff.fs.ops.RUnlock()
	if err := ff.fs.power.enter(); err != nil {
		return ff.lostErr("truncate")
	}
	defer ff.fs.power.pl.RUnlock()
	return ff.truncate(size)
}

// truncate changes the file's size, keeping what a shrink cuts for a power
// loss. pl held shared.
func (ff *faultFile) truncate(size int64) error {
	n := ff.node
	n.mu.Lock()
	defer n.mu.Unlock()
	if size < n.size && !n.dead {
		if err := n.capture(ff.File, size, n.size-size); err != nil {
			return err
		}
	}
	if err := ff.File.Truncate(size); err != nil {
		return err
	}
	n.size = size
	return nil
}

// faulty applies the armed write faults to one write of p: at off, or
// (seq) where the handle's next Write goes.
func (ff *faultFile) faulty(p []byte, off int64, seq bool) (int, error) {
	f := ff.fs
	if seq {
		f.changeWrite(ff.Name(), len(p), -1)
	} else {
		f.changeWrite(ff.Name(), len(p), off)
	}
	f.ops.RLock()
	defer f.ops.RUnlock()
	if err := f.power.enter(); err != nil {
		return 0, ff.lostErr("write")
	}
	defer f.power.pl.RUnlock()
	write := func(b []byte) (int, error) { return ff.put(b, off, seq) }
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

// put writes b, first keeping the bytes it overwrites for a power loss.
// pl held shared.
func (ff *faultFile) put(b []byte, at int64, seq bool) (int, error) {
	n := ff.node
	n.mu.Lock()
	defer n.mu.Unlock()
	off := at
	if seq {
		off = ff.off
		if ff.app {
			off = n.size
		}
	}
	if !n.dead && ff.acc != os.O_RDONLY {
		if err := n.capture(ff.File, off, int64(len(b))); err != nil {
			return 0, err
		}
	}
	var k int
	var err error
	if seq && ff.app {
		k, err = ff.File.Write(b)
	} else {
		k, err = ff.File.WriteAt(b, off)
	}
	if seq && !ff.app {
		ff.off += int64(k)
	}
	if k > 0 {
		n.size = max(n.size, off+int64(k))
	}
	return k, err
}

// Sync makes durable what the file held when Sync was called (writes that
// complete while it runs are not counted as synced by it), and says so only
// if the power did not go before it returns.
func (ff *faultFile) Sync() error {
	f := ff.fs
	f.change("sync", ff.Name())
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	if err := p.enter(); err != nil {
		return ff.lostErr("fdatasync")
	}
	n := ff.node
	n.mu.Lock()
	tok := n.markSync()
	n.mu.Unlock()
	p.pl.RUnlock()

	err := ff.sync()
	if perr := p.enter(); perr != nil {
		return ff.lostErr("fdatasync")
	}
	defer p.pl.RUnlock()
	n.mu.Lock()
	if err == nil {
		n.commitSync(tok)
	} else {
		delete(n.pins, tok)
	}
	n.mu.Unlock()
	if err == nil {
		f.mu.Lock()
		f.syncs++
		f.mu.Unlock()
	}
	return err
}

// sync is the disk's part of Sync: held, failing or stalling as armed, then
// the real fdatasync. No lock of the power-loss model is held.
func (ff *faultFile) sync() error {
	f := ff.fs
	f.mu.Lock()
	if hold := f.hold; hold != nil {
		f.held++
		f.mu.Unlock()
		select {
		case <-hold:
		case <-f.power.lostCh:
		}
		f.mu.Lock()
		f.held--
	}
	err, delay := f.syncErr, f.stall
	if err == nil {
		f.stall = 0
	}
	f.mu.Unlock()
	if f.power.lost.Load() {
		return ff.lostErr("fdatasync")
	}
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: ff.Name(), Err: err}
	}
	if delay > 0 {
		time.Sleep(delay) // the disk's latency, not a wait for state
	}
	return ff.File.Sync()
}
