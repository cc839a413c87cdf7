package raft

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A forwarding ends (cause ErrLeaderChanged) when another leader is
// learnt, not when its own target or no leader is; one learnt before it
// registered ends it at once; done releases it.
func TestLeaderWatch(t *testing.T) {
	var w leaderWatch
	none := func() string { return "" }
	ctx, done := w.forward(context.Background(), "a", none, time.Time{})
	w.observe("")
	w.observe("a")
	if ctx.Err() != nil {
		t.Fatalf("forwarding to a ended on its own leader or none: %v", context.Cause(ctx))
	}
	w.observe("b")
	if !errors.Is(context.Cause(ctx), ErrLeaderChanged) {
		t.Fatalf("forwarding to a after b was learnt: cause %v", context.Cause(ctx))
	}
	done()

	ctx, done = w.forward(context.Background(), "a", func() string { return "c" }, time.Time{})
	if !errors.Is(context.Cause(ctx), ErrLeaderChanged) {
		t.Fatalf("forwarding to a registered after c was learnt: cause %v", context.Cause(ctx))
	}
	done()

	ctx, done = w.forward(context.Background(), "a", none, time.Time{})
	done()
	if !errors.Is(ctx.Err(), context.Canceled) || errors.Is(context.Cause(ctx), ErrLeaderChanged) {
		t.Fatalf("released forwarding: %v", context.Cause(ctx))
	}
	w.observe("b")
	if len(w.subs) != 0 {
		t.Fatalf("%d forwardings still registered", len(w.subs))
	}
}

// A forwarding with a lapse ends (cause ErrLeaderChanged, marked lapsed)
// when the member knows no leader at the lapse, or learns of none after
// it; before the lapse, or while its own leader is known, it goes on.
func TestLeaderWatchLapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w leaderWatch
		leader := "a"
		current := func() string { return leader }
		start := time.Now()

		// The leader is known at the lapse: it goes on; learning of none
		// after the lapse ends it.
		ctx, done := w.forward(context.Background(), "a", current, start.Add(time.Second))
		w.observe("") // before the lapse: the old leader may still answer
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatalf("ended while its leader was known: %v", context.Cause(ctx))
		}
		w.observe("")
		if c := context.Cause(ctx); !errors.Is(c, ErrLeaderChanged) || !errors.Is(c, errLapsed) {
			t.Fatalf("none learnt after the lapse: cause %v, want a lapse", c)
		}
		done()

		// None known at the lapse: it ends at the lapse by itself, not
		// before.
		leader = ""
		start = time.Now()
		ctx, done = w.forward(context.Background(), "a", current, start.Add(time.Second))
		defer done()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatalf("ended %v before its lapse: %v", time.Since(start), context.Cause(ctx))
		}
		<-ctx.Done()
		if took := time.Since(start); took != time.Second || !errors.Is(context.Cause(ctx), errLapsed) {
			t.Fatalf("ended after %v with %v, want at the lapse (1s), lapsed", took, context.Cause(ctx))
		}
		w.mu.Lock() // observe cancels, then unregisters, under the lock
		left := len(w.subs)
		w.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d forwardings still registered", left)
		}
	})
}
