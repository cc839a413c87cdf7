package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// op is one operation of client c (a submit, or a whole cycle); it
// returns how long its claim took (0 when it claims nothing) once the
// operation is durable, or fails.
type op func(ctx context.Context, c int) (claim time.Duration, err error)

// result is one closed-loop window.
type result struct {
	Ops      int
	Errors   int
	Rate     float64 // operations per second
	P50, P99 time.Duration
	// ClaimP50, ClaimP99: the claim step's latency (cycles only).
	ClaimP50, ClaimP99 time.Duration
	// CPU is the process's CPU time (user + system) over the window per
	// completed operation: three members and the clients. On a shared
	// machine the rate follows the share of the cores the process gets;
	// the CPU an operation costs does not.
	CPU time.Duration
	// Wal is what the members' log writers reported over the window.
	Wal walFigures
}

// closedLoop runs n clients issuing op back to back for d after warm and
// measures what completed inside the window (CPU-profiled into prof when
// it is set). A failed operation is counted; the client pauses 10 ms. It
// fails when no operation succeeded.
func closedLoop(n int, warm, d time.Duration, prof string, f op) (result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var measuring atomic.Bool
	var errs atomic.Int64
	var lastErr atomic.Pointer[error]
	lat := make([][]time.Duration, n)
	claims := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				cl, err := f(ctx, c)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					lastErr.Store(&err)
					if measuring.Load() {
						errs.Add(1)
					}
					pause(ctx, 10*time.Millisecond)
					continue
				}
				if measuring.Load() && ctx.Err() == nil {
					lat[c] = append(lat[c], time.Since(t0))
					if cl > 0 {
						claims[c] = append(claims[c], cl)
					}
				}
			}
		})
	}
	pause(ctx, warm)
	stop, err := startProfile(prof)
	if err != nil {
		return result{}, err
	}
	measuring.Store(true)
	walStats.start()
	start, cpu0 := time.Now(), cpuTime()
	pause(ctx, d)
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	walFig := walStats.stop()
	cancel()
	wg.Wait()
	if err := stop(); err != nil {
		return result{}, err
	}
	all, cls := slices.Concat(lat...), slices.Concat(claims...)
	if len(all) == 0 {
		if p := lastErr.Load(); p != nil {
			return result{}, *p
		}
		return result{}, fmt.Errorf("no operation completed in %v", d)
	}
	r := result{Ops: len(all), Errors: int(errs.Load()), Rate: float64(len(all)) / elapsed.Seconds(), CPU: cpu / time.Duration(len(all)), Wal: walFig}
	r.P50, r.P99 = percentiles(all)
	r.ClaimP50, r.ClaimP99 = percentiles(cls)
	return r, nil
}

// percentiles returns the median and the 99th percentile of ds (sorted
// in place); zeros when ds is empty.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return at(0.50), at(0.99)
}

// paced runs n clients issuing f at rate operations per second in total
// (each client on its own schedule) until ctx ends, and returns the count
// of those that succeeded and what waits for the clients to return.
func paced(ctx context.Context, n int, rate float64, f op) (*atomic.Int64, func()) {
	var done atomic.Int64
	var wg sync.WaitGroup
	every := time.Duration(float64(n) / rate * float64(time.Second))
	for c := range n {
		wg.Go(func() {
			next := time.Now().Add(every * time.Duration(c) / time.Duration(n))
			for ctx.Err() == nil {
				pause(ctx, time.Until(next))
				next = next.Add(every)
				if _, err := f(ctx, c); err == nil {
					done.Add(1)
				}
			}
		})
	}
	return &done, wg.Wait
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// startProfile starts a CPU profile into the file prof (nothing when
// prof is empty) and returns what stops it.
func startProfile(prof string) (stop func() error, err error) {
	if prof == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prof)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// phase is the wall and CPU time one phase took.
type phase struct{ Wall, CPU time.Duration }

func (p phase) String() string {
	if p.Wall == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (CPU %s)", secs(p.Wall), secs(p.CPU))
}

// timed runs f with the CPU profiled into prof (when set) and returns
// the wall and process CPU time it took.
func timed(prof string, f func() error) (phase, error) {
	stop, err := startProfile(prof)
	if err != nil {
		return phase{}, err
	}
	t0, cpu0 := time.Now(), cpuTime()
	ferr := f()
	p := phase{Wall: time.Since(t0), CPU: cpuTime() - cpu0}
	if err := stop(); ferr == nil {
		ferr = err
	}
	return p, ferr
}

// cpuTime is the CPU time this process used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
