package snapshot

import (
	"io"
	"math"
	"os"

	"github.com/jobraft/jobraft/wal/vfs"
)

// FS is the file-system seam the store does all its IO through (WithFS):
// open, create and remove files and directories, rename within the store
// directory, list, stat, and sync a directory. OSFS is the default;
// wal/faultfs.FS is one for tests (fault injection, an honest power loss).
// It is the log's seam (wal.FS) with the directory operations a store
// needs, so one file system can serve a member's log and snapshots.
type FS = vfs.DirFS

// File is an open file of an FS (the same type as wal.File).
type File = vfs.File

// OSFS is the operating system's file system.
type OSFS = vfs.OSFS

var _ FS = OSFS{}

// fileReader reads f from its start to its end as it is when read: past a
// size taken earlier, if it grew.
func fileReader(f File) io.Reader { return io.NewSectionReader(f, 0, math.MaxInt64) }

// readFile reads the whole file at path.
func readFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(fileReader(f))
}

// isDir reports whether path is a directory.
func isDir(fsys FS, path string) bool {
	fi, err := fsys.Stat(path)
	return err == nil && fi.IsDir()
}
