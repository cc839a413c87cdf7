//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is held (flock) by the daemon using the data dir and names its
// pid. The lock, not the file, says the dir is in use: the file stays
// after exit, and a lock dies with its process.
const lockFile = "jobd.lock"

// lockDataDir takes dir's lock, creating dir if needed, or says which
// process holds it. release gives it back.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir lock %s: %w", path, err)
		}
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			holder = "pid " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("%w: %s is in use by %s (it holds the lock on %s)", errDataDirLocked, dir, holder, path)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	// The pid is for messages only: a failure to write it does not matter.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt(pid, 0)
	}
	return func() { f.Close() }, nil
}
