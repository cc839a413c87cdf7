//go:build unix

package clustertest

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock on f: released when the
// process exits, whatever way it ends.
func lockFile(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
