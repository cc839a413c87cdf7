//go:build linux

package main

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/internal/netrig/netrigtest"
)

var (
	netnsRTT       = flag.Duration("netns.rtt", 2*time.Millisecond, "TestNetnsFaults: round trip between members")
	netnsHeartbeat = flag.Duration("netns.heartbeat", 500*time.Millisecond, "TestNetnsFaults: heartbeat and election timeouts")
	netnsJobs      = flag.Int("netns.jobs", 1500, "TestNetnsFaults: jobs submitted")
)

// TestNetnsFaults is the black-box fault test on separate hosts: three jobd
// processes (mTLS between members), each in its own network namespace
// advertising its own address, every link through a fault proxy at
// -netns.rtt round trip (± 10%), paced submits from four clients while the
// schedule of faults.go runs (resets, a bandwidth cap, a one-way cut, the
// leader isolated, frozen and killed), then every check of the demo: every
// acknowledged job completed exactly once with its own result, no
// acknowledged job lost, the members converged (applied index, digest),
// online and offline walcompare with no committed divergence, a graceful
// stop. make netns-test runs it at 2 ms; make soak at 50 ms.
func TestNetnsFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a 3-process cluster in network namespaces")
	}
	r := netrigtest.New(t, 3)
	if err := r.Latency(*netnsRTT, *netnsRTT/10); err != nil {
		t.Fatal(err)
	}
	cfg := config{Jobs: *netnsJobs, Clients: 4, Batch: 10, TLS: true, LeaseTTL: 2 * time.Second,
		Timeout: 10 * time.Minute, Heartbeat: *netnsHeartbeat, Placement: r.Placement(), Pace: 100 * time.Millisecond}
	cfg.Faults = netnsFaults(r, *netnsHeartbeat, &cfg)
	dir, err := os.MkdirTemp("", "jobraft-netns-test-") // kept when the test fails, for the logs
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
	cfg.Progress = os.Stderr
	sum, err := run(context.Background(), cfg)
	if err != nil || !sum.OK() {
		sum.print(os.Stdout, err)
		t.Fatalf("netns fault run failed (data and logs: %s): %v", cfg.Dir, err)
	}
	t.Logf("%d jobs at %v round trip with faults in %v, per member %v, %d reruns, %d duplicate submits answered",
		cfg.Jobs, *netnsRTT, sum.TotalDur.Round(time.Millisecond), sum.PerMember, sum.Reruns, sum.Duplicates)
}
