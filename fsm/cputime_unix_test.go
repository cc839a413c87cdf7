//go:build unix

package fsm

import (
	"syscall"
	"time"
)

// processCPU is the process's CPU time so far, user plus system, every
// thread's (the garbage collector's included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
