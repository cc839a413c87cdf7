//go:build linux

package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rate is one closed-loop measurement: operations per second over the
// window and latency percentiles.
type rate struct {
	Ops      int
	Errors   int
	PerSec   float64
	P50, P99 time.Duration
}

// closedLoop runs n clients issuing op back to back; what completes within
// d after a warm-up of warm is measured. A failed operation is counted and
// its client pauses 10 ms (pacing, so a client cannot spin on a refusal).
func closedLoop(ctx context.Context, n int, warm, d time.Duration, op func(ctx context.Context, c int) error) rate {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var measuring atomic.Bool
	var errs atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				err := op(ctx, c)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					if measuring.Load() {
						errs.Add(1)
					}
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				case measuring.Load():
					lat[c] = append(lat[c], time.Since(t0))
				}
			}
		}()
	}
	wait := func(d time.Duration) {
		select {
		case <-time.After(d): // the measuring window
		case <-ctx.Done():
		}
	}
	wait(warm)
	measuring.Store(true)
	t0 := time.Now()
	wait(d)
	measuring.Store(false)
	took := time.Since(t0)
	cancel()
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := rate{Ops: len(all), Errors: int(errs.Load()), PerSec: float64(len(all)) / took.Seconds()}
	if len(all) > 0 {
		r.P50, r.P99 = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
	}
	return r
}
