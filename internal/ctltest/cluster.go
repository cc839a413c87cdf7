// Package ctltest runs jobraft controllers for tests: an in-process
// loopback cluster (Cluster) and a child-process cluster (Procs) whose
// members are the test binary re-executed, driven over a small HTTP API.
package ctltest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/internal/nodeopt"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/internal/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// Cluster is an in-process cluster of controllers over real TCP on
// loopback, real data dirs and fsync. Every member records its applied
// history (Applied, across restarts; see CheckApplied).
type Cluster struct {
	t       testing.TB
	Ctls    []*jobraft.Controller // nil while a member is stopped
	Cfgs    []jobraft.Config
	Applied []*history.Memory
	// Faults, when set (StartWithFaults), carries every member's raft
	// traffic and RPCs.
	Faults  *faultnet.Network
	applied *history.Checker
}

// Config returns a controller config with test timeouts for member id.
func Config(t testing.TB, id, dir, addr string) jobraft.Config {
	rc := nodetest.FastConfig(t, id, dir, addr)
	if os.Getenv("JOBRAFT_TEST_LOG") == "" {
		rc.Logger = hclog.NewNullLogger() // set JOBRAFT_TEST_LOG=1 for member logs
	}
	return jobraft.Config{
		Config:            rc,
		LeaseTTL:          5 * time.Second,
		ExpireInterval:    50 * time.Millisecond,
		ClaimPollInterval: 200 * time.Millisecond,
		ProposeTimeout:    3 * time.Second,
	}
}

// Start bootstraps an n-member cluster; tweak may adjust each config.
func Start(t testing.TB, n int, tweak func(i int, c *jobraft.Config)) *Cluster {
	t.Helper()
	return StartWithFaults(t, n, nil, tweak)
}

// StartWithFaults is Start with every member's raft traffic and RPCs
// carried through faults (nil: none).
func StartWithFaults(t testing.TB, n int, faults *faultnet.Network, tweak func(i int, c *jobraft.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Faults: faults, applied: history.NewChecker()}
	base := t.TempDir()
	var members []raft.Member
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%d", i)
		cfg := Config(t, id, filepath.Join(base, id), nodetest.FreeAddr(t))
		cfg.Bootstrap = true
		if tweak != nil {
			tweak(i, &cfg)
		}
		c.Cfgs = append(c.Cfgs, cfg)
		members = append(members, raft.Member{ID: id, Address: cfg.BindAddr, Voter: true})
	}
	for i := range c.Cfgs {
		c.Cfgs[i].InitialMembers = members
		c.Ctls = append(c.Ctls, nil)
		c.Applied = append(c.Applied, history.NewMemory(c.Cfgs[i].ID))
		c.StartMember(i)
	}
	t.Cleanup(c.Close)
	return c
}

// StartMember (re)starts member i from its data dir.
func (c *Cluster) StartMember(i int) {
	c.t.Helper()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		opts := append([]nodeopt.Option{nodeopt.Applied(c.Applied[i])}, nodetest.FaultOptions(c.Faults)...)
		if c.Ctls[i], err = jobraft.Open(context.Background(), c.Cfgs[i], opts...); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // the port may linger after a stop
	}
	c.t.Fatalf("start %s: %v", c.Cfgs[i].ID, err)
}

// NewMember starts a new, empty member id (not bootstrapped, in a fresh
// data dir next to the others'; tweak may adjust its config) without
// adding it, and returns its index. Add it with Node().AddMember.
func (c *Cluster) NewMember(id string, tweak func(c *jobraft.Config)) int {
	c.t.Helper()
	base := filepath.Dir(c.Cfgs[0].DataDir)
	cfg := Config(c.t, id, filepath.Join(base, id), nodetest.FreeAddr(c.t))
	if tweak != nil {
		tweak(&cfg)
	}
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	c.Cfgs = append(c.Cfgs, cfg)
	c.Ctls = append(c.Ctls, nil)
	c.Applied = append(c.Applied, history.NewMemory(id))
	i := len(c.Ctls) - 1
	c.StartMember(i)
	return i
}

// CheckApplied checks every member's applied history, running or stopped,
// against the log of the current leader up to its commit index
// (nodetest.CheckAppliedNodes), and fails the test on a violation or a
// read error. final: the run is over (the leader's whole log is the final
// log).
func (c *Cluster) CheckApplied(final bool) {
	c.t.Helper()
	nodes := make([]*raft.Node, len(c.Ctls))
	for i, ctl := range c.Ctls {
		if ctl != nil {
			nodes[i] = ctl.Node()
		}
	}
	srcs := make([]history.Source, len(c.Applied))
	for i, m := range c.Applied {
		srcs[i] = m
	}
	vs, err := nodetest.CheckAppliedNodes(c.applied, nodes, final, srcs...)
	if err != nil {
		c.t.Fatalf("applied-history check: %v", err)
	}
	if len(vs) > 0 {
		c.t.Fatal(nodetest.ViolationReport(vs))
	}
	c.t.Logf("applied history: %v", c.applied.Stats())
}

// StopMember closes member i.
func (c *Cluster) StopMember(i int) {
	if c.Ctls[i] != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Ctls[i].Close(ctx)
		c.Ctls[i] = nil
	}
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.Ctls {
		c.StopMember(i)
	}
}

// Leader returns the index of the member leading in the highest term, or
// -1.
func (c *Cluster) Leader() int {
	best, term := -1, uint64(0)
	for i, ctl := range c.Ctls {
		if ctl == nil {
			continue
		}
		s := ctl.Node().Status()
		if s.Role == "Leader" && s.Term >= term {
			best, term = i, s.Term
		}
	}
	return best
}

// WaitLeader waits for a leader whose first entry of its term is committed
// and returns its index.
func (c *Cluster) WaitLeader(d time.Duration) int {
	c.t.Helper()
	var l int
	nodetest.WaitFor(c.t, d, "a leader", func() bool {
		l = c.Leader()
		if l < 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.Ctls[l].Node().LinearizableRead(ctx)
		return err == nil
	})
	return l
}

// Follower returns the index of a running member other than the leader.
func (c *Cluster) Follower() int {
	l := c.Leader()
	for i, ctl := range c.Ctls {
		if ctl != nil && i != l {
			return i
		}
	}
	return -1
}

// Ctx returns a context that ends with the test or after d of liveness
// time: d widened by the scheduling stalls measured meanwhile (stalltest),
// at most 4×d of wall time (its Deadline). When the widened bound ends it,
// context.Cause says so, with the stall measured.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 4*d)
	ctx, cancel := context.WithCancelCause(ctx)
	w := stalltest.Start()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if w.Exceeded(d) {
					cancel(fmt.Errorf("%w: liveness bound of %s", context.DeadlineExceeded, w.Report(d)))
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); cancel(nil); cancelTimeout() })
	return ctx
}

// WaitFor polls cond until it holds or d passes, d widened by the measured
// scheduling stalls (see nodetest.WaitFor).
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, d, what, cond)
}
