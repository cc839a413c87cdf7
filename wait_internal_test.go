package jobraft

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/raft"
)

func openSolo(t testing.TB, opts ...func(*Config)) *Controller {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{Config: raft.Config{
		ID: "solo", DataDir: t.TempDir(), BindAddr: addr, Bootstrap: true,
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		Logger:             hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
	}}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Wait keeps no history: with the event history holding one entry (every
// entry applied compacts the one before), a job that finishes behind other
// entries is still returned, with its outcome, and the wait's registration
// is gone afterwards. A Wait whose context ends returns the context's error
// and leaves no registration either.
func TestWaitNeedsNoHistory(t *testing.T) {
	c := openSolo(t, func(cfg *Config) { cfg.WatchRetainEntries = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := c.Submit(ctx, SubmitRequest{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var got Job
	go func() {
		var err error
		got, err = c.Wait(ctx, job.ID)
		done <- err
	}()
	leases, err := c.Claim(ctx, ClaimRequest{Queues: []string{"q"}, Worker: "w", Wait: 5 * time.Second})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v, %d leases", err, len(leases))
	}
	for i := 0; i < 5; i++ { // entries the history drops
		if _, err := c.Submit(ctx, SubmitRequest{Queue: "other", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := leases[0].Ack(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := c.Submit(ctx, SubmitRequest{Queue: "other", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.State != StateSucceeded || string(got.Result) != "r" {
		t.Fatalf("wait returned %+v, want the acked job", got)
	}
	pending, err := c.Submit(ctx, SubmitRequest{Queue: "other", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.Wait(short, pending.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a pending job past its deadline: %v", err)
	}
	if n := c.rec.Waiting(); n != 0 {
		t.Fatalf("%d wait registrations left", n)
	}
}
