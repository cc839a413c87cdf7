package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestDemoShort is `make demo` in small: real jobd processes (mTLS between
// members), concurrent submits, the leader SIGKILLed midway and restarted,
// and every check of the demo (exactly-once completion, convergence of
// applied index and digest through the status API, walcompare over the
// data dirs with zero committed divergences).
func TestDemoShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a 3-process cluster")
	}
	cfg := config{Jobs: 400, Clients: 4, Batch: 10, TLS: true, Kill: true, LeaseTTL: 2 * time.Second,
		Timeout: 3 * time.Minute}
	// Kept when the test fails, for the logs.
	dir, err := os.MkdirTemp("", "jobraft-demo-test-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = dir
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	if err := prepare(&cfg); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	sum, err := run(context.Background(), cfg)
	if err != nil || !sum.OK() {
		sum.print(os.Stdout, err)
		t.Fatalf("demo failed (data and logs: %s): %v", cfg.Dir, err)
	}
	if sum.Failover == nil || sum.Failover.NewLeader == "" || sum.Failover.NewLeader == sum.Failover.Killed {
		t.Fatalf("no failover measured: %+v", sum.Failover)
	}
	t.Logf("failover %v, %d jobs in %v, per member %v", sum.Failover.Failover, cfg.Jobs, sum.TotalDur, sum.PerMember)
}
