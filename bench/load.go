package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// result is one closed-loop run: operations per second and latency
// percentiles of one operation (a submit, or a whole cycle).
type result struct {
	Ops      int
	Errors   int     // operations that failed (counted, retried by the next one)
	Rate     float64 // operations per second
	P50, P99 time.Duration
	// CPU is the process's CPU time (user + system, getrusage) over the
	// measured window per completed operation: all three members and the
	// clients, as only one system runs at a time.
	CPU time.Duration
	// Switches is the process's context switches (voluntary and
	// involuntary, every thread) over the window per completed operation:
	// each is a thread parked and woken again, which on a VM costs a
	// futex and often an inter-processor interrupt.
	Switches float64
}

// op is one operation of client c; it returns when the operation is
// durable (committed on a quorum), or fails.
type op func(ctx context.Context, c int) error

// closedLoop runs n clients, each issuing op back to back, for d after a
// warm-up of warm, and measures what completed inside the measured window.
// A failed operation (a leadership change under load) is counted, and the
// client pauses 10 ms before its next one; the error is the last failure
// when no operation at all succeeded.
//
// The measured window is profiled as prof says.
func closedLoop(n int, warm, d time.Duration, prof profiles, f op) (result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var measuring atomic.Bool
	var failed atomic.Pointer[error]
	var errs atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if err := f(ctx, c); err != nil {
					if ctx.Err() != nil {
						return
					}
					err = fmt.Errorf("client %d: %w", c, err)
					failed.Store(&err)
					if measuring.Load() {
						errs.Add(1)
					}
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				if measuring.Load() && ctx.Err() == nil {
					lat[c] = append(lat[c], time.Since(t0))
				}
			}
		}()
	}
	timer := time.NewTimer(warm)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	stopProfile, err := prof.start()
	if err != nil {
		cancel()
		wg.Wait()
		return result{}, err
	}
	measuring.Store(true)
	start := time.Now()
	cpu0, sw0 := usage()
	timer.Reset(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	cpu1, sw1 := usage()
	if err := stopProfile(); err != nil {
		cancel()
		wg.Wait()
		return result{}, err
	}
	cpu := cpu1 - cpu0
	cancel()
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	if p := failed.Load(); p != nil && len(all) == 0 {
		return result{}, *p
	}
	r := result{Ops: len(all), Errors: int(errs.Load()), Rate: float64(len(all)) / elapsed.Seconds(), P50: pct(0.50), P99: pct(0.99)}
	if len(all) > 0 {
		r.CPU = cpu / time.Duration(len(all))
		r.Switches = float64(sw1-sw0) / float64(len(all))
	}
	return r, nil
}

// profiles names the profile files of one measured window ("": none):
// a CPU profile of the window, and the allocation profile at its start
// (MemBase) and end (MemEnd).
type profiles struct {
	CPU, MemBase, MemEnd string
}

// start starts the window's profiles and returns what ends them.
func (p profiles) start() (stop func() error, err error) {
	if err := writeAllocs(p.MemBase); err != nil {
		return nil, err
	}
	if p.CPU == "" {
		return func() error { return writeAllocs(p.MemEnd) }, nil
	}
	f, err := os.Create(p.CPU)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return errors.Join(f.Close(), writeAllocs(p.MemEnd))
	}, nil
}

// writeAllocs writes the allocation profile so far into the file path
// (nothing when it is empty).
func writeAllocs(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

// usage is the CPU time this process used so far (user + system) and
// its threads' context switches.
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw + ru.Nivcsw)
}
