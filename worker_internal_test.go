package jobraft

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/worker"
	"github.com/jobraft/jobraft/raft"
)

// A job canceled after it was claimed but before its handler started (the
// window before the runner's fence is registered) still cancels the
// handler's context at once, not at the next lease extension.
func TestRunnerSeesCancelAppliedBeforeItsFence(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Open(ctx, Config{Config: raft.Config{
		ID: "solo", DataDir: t.TempDir(), BindAddr: addr, Bootstrap: true,
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		Logger:             hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	job, err := c.Submit(ctx, SubmitRequest{Queue: "q", Kind: "k", Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := c.Claim(ctx, ClaimRequest{Queues: []string{"q"}, Worker: "w", LeaseTTL: time.Hour, Wait: 5 * time.Second})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v, %d leases", err, len(leases))
	}
	if _, err := c.Cancel(ctx, job.ID, "before the handler"); err != nil {
		t.Fatal(err)
	}
	cause := make(chan error, 1)
	cfg := c.workerConfig(WorkerConfig{Worker: "w", Queues: map[string]int{"q": 1}, LeaseTTL: time.Hour, Handlers: map[string]Handler{
		"k": func(hctx context.Context, _ Job) ([]byte, error) {
			select {
			case <-hctx.Done():
				cause <- context.Cause(hctx)
			case <-time.After(10 * time.Second): // far below the TTL/3 extension
				cause <- nil
			}
			return nil, hctx.Err()
		},
	}})
	claims, err := worker.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The runner gets the lease claimed (and canceled) above, then nothing.
	m := c.workerMember()
	rctx, stop := context.WithCancel(ctx)
	given := false
	m.Claim = func(cctx context.Context, _ worker.Claim) ([]worker.Claimed, error) {
		if given {
			<-cctx.Done()
			return nil, cctx.Err()
		}
		given = true
		return []worker.Claimed{{Job: leases[0].Job, Token: leases[0].Token, Lease: leases[0]}}, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.Run(rctx, m, &cfg, claims)
	}()
	if err := <-cause; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("handler context cause %v, want ErrLeaseLost", err)
	}
	stop()
	<-done
}
