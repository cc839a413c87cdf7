package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// MkdirAll creates dir and its missing parents through fsys, like
// os.MkdirAll, and makes every creation durable: the directory holding
// each directory it created is synced. A directory's entry lives in its
// parent, so without that sync a power loss can take a freshly created
// directory away with everything fsynced inside it. Directories that
// existed are left as they are (whoever created them answers for them).
func MkdirAll(fsys FS, dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		_, err := fsys.ReadDirNames(p)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			break // there (a non-directory fails MkdirAll below)
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, p := range created {
		if err := fsys.SyncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}
