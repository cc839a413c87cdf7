package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The FS's directory operations, through the power-loss model (names.go).

// Mkdir creates the directory name like os.Mkdir. The new entry is durable
// after a SyncDir of its parent.
func (f *FS) Mkdir(name string, perm os.FileMode) error {
	f.change("mkdir", name)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	path, err := f.enterPath("mkdir", name)
	if err != nil {
		return err
	}
	defer p.pl.RUnlock()
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	if _, err := p.ensure(path); err != nil {
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return p.mkdir(path, perm)
}

// MkdirAll implements wal.FS: it creates dir and the parents it lacks.
// Each created directory is durable after a SyncDir of its parent.
func (f *FS) MkdirAll(dir string, perm os.FileMode) error {
	f.change("mkdir", dir)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	path, err := f.enterPath("mkdir", dir)
	if err != nil {
		return err
	}
	defer p.pl.RUnlock()
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	var missing []string
	for q := path; ; q = filepath.Dir(q) {
		fi, err := os.Stat(q)
		if err == nil {
			if !fi.IsDir() {
				return &os.PathError{Op: "mkdir", Path: q, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, q)
		if filepath.Dir(q) == q {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := p.mkdir(missing[i], perm); err != nil {
			return err
		}
	}
	return nil
}

// Remove implements wal.FS. The removal is durable after a SyncDir of the
// parent; until then the file is moved aside (hidden from ReadDirNames) so
// that a power loss can bring it back.
func (f *FS) Remove(name string) error {
	f.change("remove", name)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	path, err := f.enterPath("remove", name)
	if err != nil {
		return err
	}
	defer p.pl.RUnlock()
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	n, err := p.ensure(path)
	if err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	if n == nil {
		return f.inner.Remove(name) // what is not there: the real error
	}
	if n.dir {
		empty, err := emptyDir(path)
		if err != nil {
			return &os.PathError{Op: "remove", Path: name, Err: err}
		}
		if !empty {
			return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
	}
	return p.remove(n, func() error {
		if n.dir {
			return realRemove(n)
		}
		return f.inner.Remove(name)
	})
}

// RemoveAll removes name and everything under it, like os.RemoveAll (nil
// when it does not exist). The removal is durable after a SyncDir of the
// parent, as for Remove.
func (f *FS) RemoveAll(name string) error {
	f.change("removeall", name)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	path, err := f.enterPath("removeall", name)
	if err != nil {
		return err
	}
	defer p.pl.RUnlock()
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	n, err := p.ensure(path)
	if err != nil {
		return &os.PathError{Op: "removeall", Path: name, Err: err}
	}
	if n == nil {
		return nil
	}
	return p.remove(n, func() error { return realRemove(n) })
}

// Rename implements wal.FS, for a file or a directory, within one
// directory (ErrCrossDir otherwise). The rename is durable after a SyncDir
// of the directory; an entry it replaces is moved aside until then.
func (f *FS) Rename(oldname, newname string) error {
	f.change("rename", oldname)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	if err := p.enter(); err != nil {
		return lerr(err)
	}
	defer p.pl.RUnlock()
	po, err := absPath(oldname)
	if err != nil {
		return lerr(err)
	}
	pn, err := absPath(newname)
	if err != nil {
		return lerr(err)
	}
	if reserved(po) || reserved(pn) {
		return lerr(ErrReservedName)
	}
	if filepath.Dir(po) != filepath.Dir(pn) {
		return lerr(ErrCrossDir)
	}
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	src, err := p.ensure(po)
	if err != nil {
		return lerr(err)
	}
	if src == nil || po == pn {
		return f.inner.Rename(oldname, newname) // the real error, or nothing to do
	}
	dst, err := p.ensure(pn)
	if err != nil {
		return lerr(err)
	}
	if dst != nil {
		// What rename(2) would refuse, refused before anything moves.
		switch {
		case src.dir && !dst.dir:
			return lerr(syscall.ENOTDIR)
		case !src.dir && dst.dir:
			return lerr(syscall.EISDIR)
		case dst.dir:
			empty, err := emptyDir(pn)
			if err != nil {
				return lerr(err)
			}
			if !empty {
				return lerr(syscall.ENOTEMPTY)
			}
		}
	}
	d, name := src.parent, filepath.Base(pn)
	p.changed(d, src.name)
	p.changed(d, name)
	if dst != nil {
		if err := p.remove(dst, func() error { return realRemove(dst) }); err != nil {
			return lerr(err)
		}
	}
	if err := p.move(src, name, false, f.inner.Rename); err != nil {
		if dst != nil && dst.hidden {
			_ = p.move(dst, name, false, os.Rename) // put the replaced entry back
		}
		return err
	}
	return nil
}

// ReadDirNames implements wal.FS; entries moved aside are not listed.
func (f *FS) ReadDirNames(dir string) ([]string, error) {
	p := &f.power
	if err := p.enter(); err != nil {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: err}
	}
	defer p.pl.RUnlock()
	names, err := f.inner.ReadDirNames(dir)
	if err != nil {
		return nil, err
	}
	return visibleNames(names), nil
}

// SyncDir implements wal.FS: on success the directory's current entries
// are durable. Changes of names in it wait while it syncs.
func (f *FS) SyncDir(dir string) error {
	f.change("syncdir", dir)
	f.ops.RLock()
	defer f.ops.RUnlock()
	p := &f.power
	if err := p.enter(); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	defer p.pl.RUnlock()
	f.mu.Lock()
	err := f.syncErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	p.nsmu.Lock()
	defer p.nsmu.Unlock()
	if err := f.inner.SyncDir(dir); err != nil {
		return err
	}
	path, err := absPath(dir)
	if err != nil {
		return err
	}
	if d := p.byPath[path]; d != nil && d.dir {
		return p.syncedDir(d)
	}
	return nil
}

// enterPath starts an operation on name (see power.enter): its absolute
// path, or an *os.PathError (ErrPowerLost, ErrReservedName) with nothing
// held.
func (f *FS) enterPath(op, name string) (string, error) {
	p := &f.power
	if err := p.enter(); err != nil {
		return "", &os.PathError{Op: op, Path: name, Err: err}
	}
	path, err := absPath(name)
	if err == nil && reserved(path) {
		err = ErrReservedName
	}
	if err != nil {
		p.pl.RUnlock()
		return "", &os.PathError{Op: op, Path: name, Err: err}
	}
	return path, nil
}
