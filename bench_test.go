package jobraft_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Benchmarks: 3 members on loopback, fsync on, closed-loop clients.
//
//	go test -run X -bench . -benchtime 3s
//
// Every benchmark also reports cpu-us/op (process CPU time per operation,
// all members included) and allocs/op (every goroutine's); the jobraft
// ones fsyncs/op (every member's log fsyncs, wal.Log.Syncs), holds/op and
// expired/hold (the leader's batch holds, Config.BatchHold, and the share
// of them that ran out). -jobraft.hold and -jobraft.inflight set
// BatchHold and BatchInflight.
//
// BenchmarkSubmit/jobraft/c=N: durable submits through the controller on
// the leader (batched); .../spread/c=N: clients spread over all members
// (followers forward); .../bare/c=N: bare hashicorp/raft + raft-boltdb/v2,
// one proposal per job. Metrics: submits/s, p50-ms, p99-ms.
var benchClients = []int{1, 16, 64, 256}

const benchPayload = 256

var benchInflight = flag.Int("jobraft.inflight", 0, "Config.BatchInflight in benchmarks (0: default)")

var benchHold = flag.Duration("jobraft.hold", 0, "Config.BatchHold in benchmarks (0: default, negative: off)")

func benchTweak(_ int, c *jobraft.Config) { c.BatchInflight, c.BatchHold = *benchInflight, *benchHold }

func BenchmarkSubmit(b *testing.B) {
	payload := make([]byte, benchPayload)
	ctl := clustertest.StartCtls(b, 3, benchTweak)
	bare := startBare(b, 3)
	for _, n := range benchClients {
		b.Run(fmt.Sprintf("jobraft/c=%d", n), func(b *testing.B) {
			l := ctl.WaitLeader(wait)
			before := logTally(ctl, l)
			runClients(b, n, func(client, _ int) error {
				_, err := ctl.Ctls[l].Submit(context.Background(), jobraft.SubmitRequest{Queue: "bench", Kind: "k", Payload: payload})
				return err
			})
			logTally(ctl, l).report(b, before)
		})
		if n == 64 {
			b.Run(fmt.Sprintf("spread/c=%d", n), func(b *testing.B) {
				ctl.WaitLeader(wait)
				runClients(b, n, func(client, _ int) error {
					_, err := ctl.Ctls[client%3].Submit(context.Background(), jobraft.SubmitRequest{Queue: "bench", Kind: "k", Payload: payload})
					return err
				})
			})
		}
		b.Run(fmt.Sprintf("bare/c=%d", n), func(b *testing.B) {
			var seq atomic.Int64
			runClients(b, n, func(_, _ int) error {
				id := fmt.Sprint("j", seq.Add(1))
				for attempt := 0; ; attempt++ {
					r := bare.leader()
					if r == nil {
						time.Sleep(10 * time.Millisecond) // no leader yet: retry
						continue
					}
					err := bare.propose(r, id, payload)
					if err == nil || attempt == 100 {
						return err
					}
				}
			})
		})
	}
}

// BenchmarkCycle: full job cycles (submit → claim → ack), each client on
// its own queue, through the leader. Metrics: cycles/s (ops/s), latency,
// and entries/cycle: what the leader's log grew by per cycle.
func BenchmarkCycle(b *testing.B) {
	payload := make([]byte, benchPayload)
	ctl := clustertest.StartCtls(b, 3, benchTweak)
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("c=%d", n), func(b *testing.B) {
			l := ctl.WaitLeader(wait)
			c := ctl.Ctls[l]
			before, tally := clustertest.LastIndex(c), logTally(ctl, l)
			runClients(b, n, func(client, _ int) error {
				return clustertest.Cycle(context.Background(), c, fmt.Sprint("cy", client), payload)
			})
			b.ReportMetric(float64(clustertest.LastIndex(c)-before)/float64(b.N), "entries/cycle")
			logTally(ctl, l).report(b, tally)
		})
	}
	// shared/c=64: every client claims from one queue, as make bench's
	// cycle does (each takes whichever job is oldest).
	b.Run("shared/c=64", func(b *testing.B) {
		l := ctl.WaitLeader(wait)
		c := ctl.Ctls[l]
		before, tally := clustertest.LastIndex(c), logTally(ctl, l)
		runClients(b, 64, func(client, _ int) error {
			return sharedCycle(context.Background(), c, fmt.Sprint("w", client), payload)
		})
		b.ReportMetric(float64(clustertest.LastIndex(c)-before)/float64(b.N), "entries/cycle")
		logTally(ctl, l).report(b, tally)
	})
}

// sharedCycle is make bench's cycle: submit to the shared queue, claim one
// job of it (whichever), ack it.
func sharedCycle(ctx context.Context, c *jobraft.Controller, worker string, payload []byte) error {
	if _, err := c.Submit(ctx, jobraft.SubmitRequest{Queue: "shared", Kind: "k", Payload: payload}); err != nil {
		return err
	}
	ls, err := c.Claim(ctx, jobraft.ClaimRequest{Queues: []string{"shared"}, Worker: worker, Wait: 10 * time.Second})
	if err != nil || len(ls) != 1 {
		return fmt.Errorf("claim: %d, %v", len(ls), err)
	}
	return ls[0].Ack(ctx, nil)
}

// tally is what a benchmark's operations cost the cluster's logs and the
// leader's batchers.
type tally struct {
	syncs, holds, expired uint64
}

// logTally adds up every member's log fsyncs (wal.Log.Syncs) and the
// leader l's holds.
func logTally(c *clustertest.CtlCluster, l int) tally {
	var t tally
	for _, ctl := range c.Ctls {
		t.syncs += ctl.Node().Log().Syncs()
	}
	st := c.Ctls[l].LocalStats()
	t.holds, t.expired = st.BatchHolds, st.BatchHoldsExpired
	return t
}

// report reports, per operation since before, the fsyncs of all members
// together, and the leader's holds with the share of them that expired.
func (t tally) report(b *testing.B, before tally) {
	b.ReportMetric(float64(t.syncs-before.syncs)/float64(b.N), "fsyncs/op")
	if h := t.holds - before.holds; h > 0 {
		b.ReportMetric(float64(h)/float64(b.N), "holds/op")
		b.ReportMetric(float64(t.expired-before.expired)/float64(h), "expired/hold")
	}
}

// cpuTime is the CPU time this process used so far (user + system), all
// three members and the clients together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClients runs b.N operations over n closed-loop clients and reports
// throughput and latency percentiles.
func runClients(b *testing.B, n int, op func(client, i int) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ReportAllocs() // every goroutine's: all three members run in this process
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				t0 := time.Now()
				if err := op(c, i); err != nil {
					failed.Store(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(0, "ns/op")
}
