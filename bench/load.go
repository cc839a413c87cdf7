package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one closed-loop run: operations per second and latency
// percentiles of one operation (a submit, or a whole cycle).
type result struct {
	Ops      int
	Rate     float64 // operations per second
	P50, P99 time.Duration
}

// op is one operation of client c; it returns when the operation is
// durable (committed on a quorum), or fails.
type op func(ctx context.Context, c int) error

// closedLoop runs n clients, each issuing op back to back, for d after a
// warm-up of warm, and measures what completed inside the measured window.
func closedLoop(n int, warm, d time.Duration, f op) (result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var measuring atomic.Bool
	var failed atomic.Pointer[error]
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if err := f(ctx, c); err != nil {
					if ctx.Err() == nil {
						err = fmt.Errorf("client %d: %w", c, err)
						failed.CompareAndSwap(nil, &err)
						cancel()
					}
					return
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
	measuring.Store(true)
	start := time.Now()
	timer.Reset(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	if p := failed.Load(); p != nil {
		return result{}, *p
	}
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
	return result{Ops: len(all), Rate: float64(len(all)) / elapsed.Seconds(), P50: pct(0.50), P99: pct(0.99)}, nil
}
