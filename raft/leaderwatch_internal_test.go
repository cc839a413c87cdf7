package raft

import (
	"context"
	"errors"
	"testing"
)

// A forwarding ends (cause ErrLeaderChanged) when another leader is
// learnt, not when its own target or no leader is; one learnt before it
// registered ends it at once; done releases it.
func TestLeaderWatch(t *testing.T) {
	var w leaderWatch
	none := func() string { return "" }
	ctx, done := w.forward(context.Background(), "a", none)
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

	ctx, done = w.forward(context.Background(), "a", func() string { return "c" })
	if !errors.Is(context.Cause(ctx), ErrLeaderChanged) {
		t.Fatalf("forwarding to a registered after c was learnt: cause %v", context.Cause(ctx))
	}
	done()

	ctx, done = w.forward(context.Background(), "a", none)
	done()
	if !errors.Is(ctx.Err(), context.Canceled) || errors.Is(context.Cause(ctx), ErrLeaderChanged) {
		t.Fatalf("released forwarding: %v", context.Cause(ctx))
	}
	w.observe("b")
	if len(w.subs) != 0 {
		t.Fatalf("%d forwardings still registered", len(w.subs))
	}
}
