// Package vfs is the file-system seam of the packages that write durable
// state: wal (FS: what a log needs) and snapshot (DirFS: a log's needs and
// the directory operations of a snapshot store), and MkdirAll, the durable
// directory creation they and a raft member's data directory use. OSFS is
// the operating system's; wal/faultfs implements both over the real disk
// for tests (fault injection, an honest power loss). The types are the
// same in every package (wal.FS, wal.File, wal.OSFS and snapshot.FS,
// snapshot.File are aliases of these), so one file system serves a log and
// a snapshot store. It imports nothing of this module: snapshot depends on
// it, not on the log.
package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// FS is what a log does all its IO through.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file.
	Remove(name string) error
	// Rename renames a file (atomic within a directory).
	Rename(oldname, newname string) error
	// ReadDirNames lists the names in dir, sorted.
	ReadDirNames(dir string) ([]string, error)
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes a directory's entries (creations, removals, renames)
	// durable.
	SyncDir(dir string) error
}

// DirFS is an FS with the directory operations of a snapshot store.
type DirFS interface {
	FS
	// Mkdir creates one directory, failing if it exists (os.Mkdir).
	Mkdir(name string, perm os.FileMode) error
	// RemoveAll removes name and everything under it; nil if it does not
	// exist (os.RemoveAll).
	RemoveAll(name string) error
	// Stat describes name, following symbolic links (os.Stat).
	Stat(name string) (os.FileInfo, error)
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	// Sync makes written data durable (fdatasync where available).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's current size.
	Size() (int64, error)
	Close() error
	// Name returns the path the file was opened with.
	Name() string
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ DirFS = OSFS{}

type osFile struct{ *os.File }

func (f osFile) Sync() error { return fdatasync(f.File) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// ReadDirNames implements FS.
func (OSFS) ReadDirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Mkdir implements DirFS.
func (OSFS) Mkdir(name string, perm os.FileMode) error { return os.Mkdir(name, perm) }

// RemoveAll implements DirFS.
func (OSFS) RemoveAll(name string) error { return os.RemoveAll(name) }

// Stat implements DirFS.
func (OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
