package clustertest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/walcompare"
)

// NodeCluster is an in-process loopback cluster of raft.Nodes over KV
// state machines, with real TCP, real data dirs and fsync. Every member
// records its applied history (Applied, across restarts); the convergence
// waits of its Group check it on every poll and fail the test at once on
// a violation (CheckApplied).
type NodeCluster struct {
	*Group
	t       testing.TB
	Nodes   []*raft.Node // nil while a member is stopped
	KVs     []*KV
	Cfgs    []raft.Config
	Applied []*history.Memory
	// Faults, when set, carries every member's raft traffic and RPCs.
	Faults *faultnet.Network
	// WAL are the extra wal.Open options of each member, used at every
	// (re)start: a test may change them between a stop and a start.
	WAL     [][]wal.Option
	walOpts func(i int) []wal.Option
	extra   func(i int) []nodeopt.Option
	tweak   func(*raft.Config)
	base    string
}

// FastConfig returns a member config with test timeouts. They are short
// (a failover takes well under a second) but not so short that the -race
// test process, sharing two cores with a loaded machine, loses leaders to
// its own scheduling stalls at every turn: a leader steps down after a
// lease of 250 ms without a quorum's answer (legal Raft, but every such
// loss turns proposals indeterminate).
func FastConfig(t testing.TB, id, dir, addr string) raft.Config {
	return raft.Config{
		ID: id, DataDir: dir, BindAddr: addr,
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 2 * time.Millisecond,
		SnapshotInterval: time.Hour, SnapshotThreshold: 1 << 30, TrailingLogs: 64,
		ApplyTimeout: 2 * time.Second,
		Logger:       hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: testWriter{t}}),
		LogServices:  Digests(),
	}
}

// Digests serves walcompare's digest protocol (the online comparison the
// checkers read), as every member jobraft.Open starts does.
func Digests() map[string]raft.LogService {
	return map[string]raft.LogService{walcompare.DigestMethod: walcompare.ServeDigest}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// Discard is a logger writer for benchmarks.
var Discard io.Writer = io.Discard

// StartNodes bootstraps an n-member cluster. faults may be nil.
func StartNodes(t testing.TB, n int, faults *faultnet.Network, tweak func(*raft.Config)) *NodeCluster {
	t.Helper()
	return StartNodesWAL(t, n, faults, tweak, nil)
}

// StartNodesWAL is StartNodes with extra wal.Open options for member i from
// walOpts(i) (walOpts may be nil), kept in Cluster.WAL; a member added by
// Join gets walOpts of its index too.
func StartNodesWAL(t testing.TB, n int, faults *faultnet.Network, tweak func(*raft.Config), walOpts func(i int) []wal.Option) *NodeCluster {
	t.Helper()
	return StartNodesOpts(t, n, faults, tweak, walOpts, nil)
}

// StartNodesOpts is StartNodesWAL with extra internal options for member i from
// extra(i) (nil: none), used at every (re)start.
func StartNodesOpts(t testing.TB, n int, faults *faultnet.Network, tweak func(*raft.Config), walOpts func(i int) []wal.Option, extra func(i int) []nodeopt.Option) *NodeCluster {
	t.Helper()
	c := &NodeCluster{t: t, Faults: faults, walOpts: walOpts, extra: extra, tweak: tweak}
	c.Group = NewGroup(t, c.members, Policy{})
	c.Cfgs = bootstrapped(t, n, func(_ int, id, dir, addr string) raft.Config {
		cfg := FastConfig(t, id, dir, addr)
		cfg.Bootstrap = true
		if tweak != nil {
			tweak(&cfg)
		}
		return cfg
	}, func(c *raft.Config) *raft.Config { return c })
	c.base = filepath.Dir(c.Cfgs[0].DataDir)
	for i := range c.Cfgs {
		c.Nodes = append(c.Nodes, nil)
		c.KVs = append(c.KVs, nil)
		c.WAL = append(c.WAL, c.walOptsOf(i))
		c.Applied = append(c.Applied, history.NewMemory(c.Cfgs[i].ID))
		c.StartMember(i)
	}
	t.Cleanup(c.Close)
	return c
}

// StartMember (re)starts member i from its data dir.
func (c *NodeCluster) StartMember(i int) {
	c.t.Helper()
	kv := NewKV()
	c.Nodes[i] = openRetry(c.t, c.Cfgs[i].ID, func() (*raft.Node, error) { return raft.Open(c.Cfgs[i], kv, c.options(i)...) })
	c.KVs[i] = kv
}

func (c *NodeCluster) walOptsOf(i int) []wal.Option {
	if c.walOpts == nil {
		return nil
	}
	return c.walOpts(i)
}

// options are member i's internal options: its applied history, the
// cluster's faults, its wal options.
func (c *NodeCluster) options(i int) []nodeopt.Option {
	opts := append([]nodeopt.Option{nodeopt.Applied(c.Applied[i])}, FaultOptions(c.Faults)...)
	if len(c.WAL[i]) > 0 {
		opts = append(opts, nodeopt.WALOptions(c.WAL[i]...))
	}
	if c.extra != nil {
		opts = append(opts, c.extra(i)...)
	}
	return opts
}

// StopMember stops member i.
func (c *NodeCluster) StopMember(i int) {
	if c.Nodes[i] != nil {
		c.Nodes[i].Close()
		c.Nodes[i] = nil
	}
}

// Close stops every member.
func (c *NodeCluster) Close() {
	for i := range c.Nodes {
		c.StopMember(i)
	}
}

// Join starts a new, empty member id (not bootstrapped, same faults and
// tweak as the others), asks member via to add it (AddMember: non-voter,
// then voter once caught up) and returns its index in the cluster.
func (c *NodeCluster) Join(via int, id string, d time.Duration) int {
	c.t.Helper()
	i := c.NewMember(id, nil)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ld := c.Leader()
		var term uint64
		if ld >= 0 {
			term = c.Nodes[ld].Status().Term
		}
		err := c.Nodes[via].AddMember(ctx, id, c.Nodes[i].Addr())
		if err == nil {
			return i
		}
		// A leader that lost its lease (a scheduling stall on a loaded
		// machine) fails the change in flight; AddMember is idempotent, so
		// it is asked again of the next leader. Any other failure is one.
		moved := ld >= 0 && (c.Nodes[ld] == nil || c.Nodes[ld].Status().Role != "Leader" || c.Nodes[ld].Status().Term != term)
		if !moved || ctx.Err() != nil {
			c.t.Fatalf("add %s through %s: %v", id, c.Cfgs[via].ID, err)
		}
		c.t.Logf("add %s through %s: %v; the leadership moved, asking again", id, c.Cfgs[via].ID, err)
		c.WaitLeader(d)
	}
}

// NewMember starts a new, empty member id (not bootstrapped, same faults
// and tweak as the others, then tweak when not nil, in a fresh data dir)
// without adding it, and returns its index in the cluster. An id used
// before gets a fresh data dir (a replacement).
func (c *NodeCluster) NewMember(id string, tweak func(*raft.Config)) int {
	c.t.Helper()
	dir := filepath.Join(c.base, id)
	for k := 1; ; k++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		dir = filepath.Join(c.base, fmt.Sprintf("%s.%d", id, k))
	}
	cfg := FastConfig(c.t, id, dir, FreeAddr(c.t))
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	c.Cfgs = append(c.Cfgs, cfg)
	c.Nodes = append(c.Nodes, nil)
	c.KVs = append(c.KVs, nil)
	c.Applied = append(c.Applied, history.NewMemory(id))
	i := len(c.Nodes) - 1
	c.WAL = append(c.WAL, c.walOptsOf(i))
	c.StartMember(i)
	return i
}

// Settle waits until every proposal the leader's raft has accepted so far
// is applied on the leader: a barrier queued behind them (hashicorp/raft
// dispatches in order). A caller that gave up on a proposal (its context
// ended: outcome unknown) leaves it queued, and on a loaded machine the
// leader may be stuck behind a slow fsync long enough that every member
// looks converged while such entries are still to come. Call Settle after
// stopping a load and before WaitConverged. d is a liveness bound (widened
// by measured stalls); a leader change is retried on the new leader.
func (c *NodeCluster) Settle(d time.Duration) {
	c.t.Helper()
	WaitFor(c.t, d, "a barrier behind every accepted proposal to apply on the leader", func() bool {
		l := c.Leader()
		if l < 0 {
			return false
		}
		return c.Nodes[l].Raft().Barrier(2*time.Second).Error() == nil
	})
}

// Propose proposes on member i with a timeout.
func (c *NodeCluster) Propose(i int, cmd string, d time.Duration) (raft.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Nodes[i].Propose(ctx, []byte(cmd))
}

// OpenNew opens a member with cfg at a fresh loopback address (cfg.BindAddr
// is replaced), trying another address when the port was taken between
// FreeAddr and the bind. The member is closed at cleanup.
func OpenNew(t testing.TB, cfg raft.Config, sm raft.StateMachine) *raft.Node {
	t.Helper()
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		cfg.BindAddr = FreeAddr(t)
		var n *raft.Node
		if n, err = raft.Open(cfg, sm); err == nil {
			t.Cleanup(func() { n.Close() })
			return n
		}
	}
	t.Fatalf("open %s: %v", cfg.ID, err)
	return nil
}

// bootstrapped returns n configs of members m0, m1, ... in data dirs
// under a fresh temp dir, member i's made by cfg, every one naming them all (at
// the address cfg gave) as the initial members; raftOf is a config's raft
// part.
func bootstrapped[C any](t testing.TB, n int, cfg func(i int, id, dir, addr string) C, raftOf func(*C) *raft.Config) []C {
	base := t.TempDir()
	cfgs := make([]C, n)
	var members []raft.Member
	for i := range cfgs {
		id := fmt.Sprintf("m%d", i)
		cfgs[i] = cfg(i, id, filepath.Join(base, id), FreeAddr(t))
		members = append(members, raft.Member{ID: id, Address: raftOf(&cfgs[i]).BindAddr, Voter: true})
	}
	for i := range cfgs {
		raftOf(&cfgs[i]).InitialMembers = members
	}
	return cfgs
}

// openRetry opens a member with open, again while it fails for a while
// (the port of a stopped predecessor may linger), and fails the test when
// it never opens.
func openRetry[M any](t testing.TB, id string, open func() (M, error)) M {
	t.Helper()
	var m M
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if m, err = open(); err == nil {
			return m
		}
		time.Sleep(20 * time.Millisecond) // the port may linger after a stop
	}
	t.Fatalf("start %s: %v", id, err)
	return m
}

// members are the cluster's members as its Group sees them.
func (c *NodeCluster) members() []Member {
	out := make([]Member, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = inProcess{c.Cfgs[i].ID, n, c.Applied[i]}
	}
	return out
}

// inProcess is a member running in this process, as a Group sees it: its
// node (nil while it is stopped) and its applied history.
type inProcess struct {
	id      string
	node    *raft.Node
	applied *history.Memory
}

var _ Member = inProcess{}

func (m inProcess) ID() string { return m.id }
func (m inProcess) Up() bool   { return m.node != nil }

func (m inProcess) Status(context.Context) (raft.Status, error) {
	if m.node == nil {
		return raft.Status{}, fmt.Errorf("%w: %s", ErrNotRunning, m.id)
	}
	return m.node.Status(), nil
}

func (m inProcess) LinearizableRead(ctx context.Context) error {
	if m.node == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, m.id)
	}
	_, err := m.node.LinearizableRead(ctx)
	return err
}

func (m inProcess) Log(context.Context) (walcompare.Member, error) {
	if m.node == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, m.id)
	}
	return walcompare.FromLogStore(m.id, m.node.Log()), nil
}

func (m inProcess) Applied() history.Source { return m.applied }
