package raft_test

// Benchmarks (make bench: go test -run '^$' -bench . ./raft/):
//
//   - BenchmarkPropose/proposers=N: proposals/s and p50/p99 latency with N
//     concurrent proposers of 256-byte commands on 3 members over loopback
//     (fsync on), for raft.Node and, side by side in the same run, for bare
//     hashicorp/raft over raft-boltdb/v2 and raft.NewTCPTransport with the
//     same timeouts (r.Apply on the leader). Reports node/bare as "ratio".
//   - BenchmarkFailover: leader process SIGKILLed → first commit through a
//     survivor, over -raft.failover.rounds crashes (default 20), min, median
//     and max in milliseconds; the heartbeat timeout is 150ms.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

var failoverRounds = flag.Int("raft.failover.rounds", 20, "leader crashes measured by BenchmarkFailover")

const benchPayload = 256

// benchCmd is a unique 256-byte KV command.
func benchCmd(id uint64) []byte {
	b := make([]byte, benchPayload)
	n := copy(b, fmt.Sprintf("b%d=", id))
	for i := n; i < len(b); i++ {
		b[i] = 'x'
	}
	return b
}

// proposer is one system under test: propose returns when the command is
// committed and applied on the leader.
type proposer interface {
	propose(cmd []byte) error
}

type nodeProposer struct{ n *raft.Node }

func (p nodeProposer) propose(cmd []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.n.Propose(ctx, cmd)
	return err
}

type bareProposer struct{ r *hraft.Raft }

func (p bareProposer) propose(cmd []byte) error { return p.r.Apply(cmd, 10*time.Second).Error() }

type loadResult struct {
	perSec   float64
	p50, p99 time.Duration
}

// runLoad makes total proposals from workers goroutines.
func runLoad(b *testing.B, p proposer, workers, total int, ids *atomic.Uint64) loadResult {
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				t0 := time.Now()
				if err := p.propose(benchCmd(ids.Add(1))); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	return loadResult{
		perSec: float64(total) / el.Seconds(),
		p50:    lat[total/2],
		p99:    lat[min(total-1, total*99/100)],
	}
}

func benchConfig(cfg *raft.Config) {
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Error, Output: io.Discard})
}

func BenchmarkPropose(b *testing.B) {
	node := clustertest.StartNodes(b, 3, nil, benchConfig)
	nl := node.WaitLeader(wait)
	bare := startBare(b, 3, node.Cfgs[0])
	var ids atomic.Uint64
	for _, workers := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("proposers=%d", workers), func(b *testing.B) {
			total := max(b.N, workers)
			n := runLoad(b, nodeProposer{node.Nodes[nl]}, workers, total, &ids)
			r := runLoad(b, bareProposer{bare}, workers, total, &ids)
			b.ReportMetric(n.perSec, "node-props/s")
			b.ReportMetric(r.perSec, "bare-props/s")
			b.ReportMetric(n.perSec/r.perSec, "ratio")
			b.ReportMetric(float64(n.p50.Microseconds())/1000, "node-p50-ms")
			b.ReportMetric(float64(n.p99.Microseconds())/1000, "node-p99-ms")
			b.ReportMetric(float64(r.p50.Microseconds())/1000, "bare-p50-ms")
			b.ReportMetric(float64(r.p99.Microseconds())/1000, "bare-p99-ms")
		})
	}
}

// startBare starts a 3-member hashicorp/raft cluster over raft-boltdb/v2
// (fsync on) and NewTCPTransport on loopback, with the timeouts of like
// (everything else hashicorp/raft's defaults), and returns its leader.
func startBare(b *testing.B, n int, like raft.Config) *hraft.Raft {
	b.Helper()
	base := b.TempDir()
	var rafts []*hraft.Raft
	var conf hraft.Configuration
	var trans []*hraft.NetworkTransport
	for i := 0; i < n; i++ {
		tr, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		trans = append(trans, tr)
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: hraft.Voter, ID: hraft.ServerID(fmt.Sprintf("b%d", i)), Address: tr.LocalAddr()})
	}
	for i := 0; i < n; i++ {
		dir := filepath.Join(base, fmt.Sprintf("b%d", i))
		store, err := raftboltdb.NewBoltStore(dir + ".bolt")
		if err != nil {
			b.Fatal(err)
		}
		snaps, err := hraft.NewFileSnapshotStore(dir, 2, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		rc := hraft.DefaultConfig()
		rc.LocalID = conf.Servers[i].ID
		rc.HeartbeatTimeout, rc.ElectionTimeout = like.HeartbeatTimeout, like.ElectionTimeout
		rc.LeaderLeaseTimeout, rc.CommitTimeout = like.LeaderLeaseTimeout, like.CommitTimeout
		rc.SnapshotInterval, rc.SnapshotThreshold = like.SnapshotInterval, like.SnapshotThreshold
		rc.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
		r, err := hraft.NewRaft(rc, &bareFSM{kv: clustertest.NewKV()}, store, store, snaps, trans[i])
		if err != nil {
			b.Fatal(err)
		}
		if err := r.BootstrapCluster(conf).Error(); err != nil {
			b.Fatal(err)
		}
		rafts = append(rafts, r)
		b.Cleanup(func() {
			r.Shutdown().Error()
			store.Close()
		})
	}
	var leader *hraft.Raft
	clustertest.WaitFor(b, wait, "a bare leader", func() bool {
		for _, r := range rafts {
			if r.State() == hraft.Leader {
				leader = r
				return true
			}
		}
		return false
	})
	return leader
}

// bareFSM is the same KV as the node's, as a plain hashicorp/raft FSM.
type bareFSM struct{ kv *clustertest.KV }

func (f *bareFSM) Apply(l *hraft.Log) interface{} {
	return f.kv.Apply(raft.Entry{Index: l.Index, Term: l.Term, Cmd: l.Data})
}

func (f *bareFSM) Snapshot() (hraft.FSMSnapshot, error) {
	s, err := f.kv.Snapshot()
	return bareSnap{s}, err
}

func (f *bareFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.kv.Restore(rc)
}

type bareSnap struct{ s raft.Snapshot }

func (s bareSnap) Persist(sink hraft.SnapshotSink) error {
	if err := s.s.Persist(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s bareSnap) Release() { s.s.Release() }

// BenchmarkFailover: a 3-member cluster of member processes; each round
// SIGKILLs the leader and times the first proposal committed through a
// survivor (forwarded to the new leader once there is one), then restarts
// the victim and waits for convergence.
func BenchmarkFailover(b *testing.B) {
	h := clustertest.NewNodeProcs(b)
	ms := h.StartCluster(3, nil)
	var times []time.Duration
	var term uint64
	for round := 0; round < *failoverRounds; round++ {
		leader, st := h.LeaderProc(wait, term)
		wctx, wcancel := context.WithTimeout(context.Background(), wait)
		if _, err := leader.Propose(wctx, []byte(fmt.Sprintf("warm%d=v", round))); err != nil {
			b.Fatal(err)
		}
		wcancel()
		h.WaitConverged(wait)
		var survivor *clustertest.NodeProc
		for _, m := range ms {
			if m != leader {
				survivor = m
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		t0 := time.Now()
		leader.Kill()
		// A proposal forwarded to the dead leader over a pooled connection
		// is indeterminate (written, never answered): propose another key.
		var err error
		for try := 0; ; try++ {
			if _, err = survivor.Propose(ctx, []byte(fmt.Sprintf("failover%d-%d=v", round, try))); err == nil || ctx.Err() != nil {
				break
			}
		}
		d := time.Since(t0)
		cancel()
		if err != nil {
			b.Fatalf("round %d: first proposal after the kill: %v", round, err)
		}
		times = append(times, d)
		leader.Restart()
		term = st.Term
	}
	slices.Sort(times)
	ms3 := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms3(times[0]), "min-ms")
	b.ReportMetric(ms3(times[len(times)/2]), "median-ms")
	b.ReportMetric(ms3(times[len(times)-1]), "max-ms")
	b.ReportMetric(float64(len(times)), "crashes")
	b.Logf("failover over %d leader crashes (heartbeat timeout %v): min %v median %v max %v",
		len(times), ms[0].Cfg.HeartbeatTimeout, times[0], times[len(times)/2], times[len(times)-1])
}
