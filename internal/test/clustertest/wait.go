package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// WaitFor polls cond until it holds or d passes. d is a liveness bound:
// it is widened by the scheduling stalls the process suffered during the
// wait (stalltest), and a failure prints the stall it measured.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	w := stalltest.Start()
	for !cond() {
		if w.Exceeded(d) {
			t.Fatalf("timed out after %s waiting for %s", w.Report(d), what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// Ctx returns a context that ends with the test or after d of liveness
// time: d widened by the scheduling stalls measured meanwhile (stalltest),
// at most 4×d of wall time (its Deadline). When the widened bound ends it,
// context.Cause says so, with the stall measured.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 4*d)
	ctx, cancel := context.WithCancelCause(ctx)
	w := stalltest.Start()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if w.Exceeded(d) {
					cancel(fmt.Errorf("%w: liveness bound of %s", context.DeadlineExceeded, w.Report(d)))
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); cancel(nil); cancelTimeout() })
	return ctx
}

// Seed returns the seed of a randomized test: s, or one from the clock
// when s is 0. It logs it with how to replay it (name: the seed's flag).
func Seed(t testing.TB, s int64, name string) int64 {
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -%s=%d)", s, name, s)
	return s
}
