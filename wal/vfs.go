package wal

import "github.com/jobraft/jobraft/wal/vfs"

// FS is the file-system seam the log does all its IO through: open,
// remove, rename, list, create directories, sync a directory. OSFS is the
// real one; wal/faultfs injects write, sync and space errors and an honest
// power loss for tests. It is the same type as the snapshot store's seam
// (snapshot.FS adds directory operations), so one file system can serve
// both.
type FS = vfs.FS

// File is an open file of an FS: ReadAt, Write, WriteAt, Sync (fdatasync
// where available), Truncate, Size, Close, Name.
type File = vfs.File

// OSFS is the operating system's file system (it also has the directory
// operations snapshot.FS needs).
type OSFS = vfs.OSFS
