package jobraft_test

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// bareCluster is the baseline: bare hashicorp/raft over its TCP transport
// and raft-boltdb/v2 (fsync on), with the controller's timeouts, applying
// the same job state machine, one proposal per job.
type bareCluster struct {
	rafts  []*hraft.Raft
	stores []*raftboltdb.BoltStore
	trans  []*hraft.NetworkTransport
}

type bareFSM struct{ jobs *fsm.Jobs }

func (f *bareFSM) Apply(l *hraft.Log) interface{} {
	return f.jobs.Apply(fsm.Entry{Index: l.Index, Term: l.Term, Time: l.AppendedAt, Cmd: l.Data})
}
func (f *bareFSM) Snapshot() (hraft.FSMSnapshot, error) { return nil, fmt.Errorf("not in benchmarks") }
func (f *bareFSM) Restore(io.ReadCloser) error          { return fmt.Errorf("not in benchmarks") }

func startBare(tb testing.TB, n int) *bareCluster {
	tb.Helper()
	c := &bareCluster{}
	dir := tb.TempDir()
	var servers []hraft.Server
	fast := clustertest.CtlConfig(tb, "x", dir, "127.0.0.1:0").Config
	for i := 0; i < n; i++ {
		tr, err := hraft.NewTCPTransport(clustertest.FreeAddr(tb), nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			tb.Fatal(err)
		}
		st, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, fmt.Sprintf("b%d.db", i))})
		if err != nil {
			tb.Fatal(err)
		}
		c.trans, c.stores = append(c.trans, tr), append(c.stores, st)
		servers = append(servers, hraft.Server{ID: hraft.ServerID(fmt.Sprint("b", i)), Address: tr.LocalAddr()})
	}
	for i := 0; i < n; i++ {
		cfg := hraft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = fast.HeartbeatTimeout, fast.ElectionTimeout
		cfg.LeaderLeaseTimeout, cfg.CommitTimeout = fast.LeaderLeaseTimeout, fast.CommitTimeout
		cfg.MaxAppendEntries, cfg.BatchApplyCh = 256, true // as raft.Node configures it
		cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<30
		cfg.Logger = hclog.NewNullLogger()
		r, err := hraft.NewRaft(cfg, &bareFSM{jobs: fsm.New()}, c.stores[i], c.stores[i], hraft.NewDiscardSnapshotStore(), c.trans[i])
		if err != nil {
			tb.Fatal(err)
		}
		if err := r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil {
			tb.Fatal(err)
		}
		c.rafts = append(c.rafts, r)
	}
	tb.Cleanup(c.close)
	clustertest.WaitFor(tb, wait, "a bare leader", func() bool { return c.leader() != nil })
	return c
}

func (c *bareCluster) leader() *hraft.Raft {
	for _, r := range c.rafts {
		if r.State() == hraft.Leader {
			return r
		}
	}
	return nil
}

func (c *bareCluster) close() {
	for i, r := range c.rafts {
		_ = r.Shutdown().Error()
		_ = c.trans[i].Close()
		_ = c.stores[i].Close()
	}
}

// propose applies one submit of a job with a unique ID and the payload on
// the leader and waits for it to be committed and applied.
func (c *bareCluster) propose(r *hraft.Raft, id string, payload []byte) error {
	cmd, err := fsm.EncodeCommand(&fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: id, Queue: "bench", Kind: "k", Payload: payload}}})
	if err != nil {
		return err
	}
	return r.Apply(cmd, 10*time.Second).Error()
}
