package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// CtlCluster is an in-process cluster of controllers over real TCP on
// loopback, real data dirs and fsync. Every member records its applied
// history (Applied, across restarts; see RequireApplied). Its WaitLeader
// waits for a leader serving a linearizable read.
type CtlCluster struct {
	*Group
	t       testing.TB
	Ctls    []*jobraft.Controller // nil while a member is stopped
	Cfgs    []jobraft.Config
	Applied []*history.Memory
	// Faults, when set (StartWithFaults), carries every member's raft
	// traffic and RPCs.
	Faults *faultnet.Network
}

// CtlConfig returns a controller config with test timeouts for member id.
func CtlConfig(t testing.TB, id, dir, addr string) jobraft.Config {
	rc := FastConfig(t, id, dir, addr)
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

// StartCtls bootstraps an n-member cluster; tweak may adjust each config.
func StartCtls(t testing.TB, n int, tweak func(i int, c *jobraft.Config)) *CtlCluster {
	t.Helper()
	return StartCtlsWithFaults(t, n, nil, tweak)
}

// StartCtlsWithFaults is StartCtls with every member's raft traffic and RPCs
// carried through faults (nil: none).
func StartCtlsWithFaults(t testing.TB, n int, faults *faultnet.Network, tweak func(i int, c *jobraft.Config)) *CtlCluster {
	t.Helper()
	c := &CtlCluster{t: t, Faults: faults}
	c.Group = NewGroup(t, c.members, Policy{ServingLeader: true})
	c.Cfgs = bootstrapped(t, n, func(i int, id, dir, addr string) jobraft.Config {
		cfg := CtlConfig(t, id, dir, addr)
		cfg.Bootstrap = true
		if tweak != nil {
			tweak(i, &cfg)
		}
		return cfg
	}, func(c *jobraft.Config) *raft.Config { return &c.Config })
	for i := range c.Cfgs {
		c.Ctls = append(c.Ctls, nil)
		c.Applied = append(c.Applied, history.NewMemory(c.Cfgs[i].ID))
		c.StartMember(i)
	}
	t.Cleanup(c.Close)
	return c
}

// StartMember (re)starts member i from its data dir.
func (c *CtlCluster) StartMember(i int) {
	c.t.Helper()
	opts := append([]nodeopt.Option{nodeopt.Applied(c.Applied[i])}, FaultOptions(c.Faults)...)
	c.Ctls[i] = openRetry(c.t, c.Cfgs[i].ID, func() (*jobraft.Controller, error) {
		return jobraft.Open(context.Background(), c.Cfgs[i], opts...)
	})
}

// NewMember starts a new, empty member id (not bootstrapped, in a fresh
// data dir next to the others'; tweak may adjust its config) without
// adding it, and returns its index. Add it with Node().AddMember.
func (c *CtlCluster) NewMember(id string, tweak func(c *jobraft.Config)) int {
	c.t.Helper()
	base := filepath.Dir(c.Cfgs[0].DataDir)
	cfg := CtlConfig(c.t, id, filepath.Join(base, id), FreeAddr(c.t))
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

// StopMember closes member i.
func (c *CtlCluster) StopMember(i int) {
	if c.Ctls[i] != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Ctls[i].Close(ctx)
		c.Ctls[i] = nil
	}
}

// Close stops every member.
func (c *CtlCluster) Close() {
	for i := range c.Ctls {
		c.StopMember(i)
	}
}

// Follower returns the index of a running member other than the leader.
func (c *CtlCluster) Follower() int {
	l := c.Leader()
	for i, ctl := range c.Ctls {
		if ctl != nil && i != l {
			return i
		}
	}
	return -1
}

// members are the cluster's members as its Group sees them: their
// controllers' nodes.
func (c *CtlCluster) members() []Member {
	out := make([]Member, len(c.Ctls))
	for i, ctl := range c.Ctls {
		m := inProcess{id: c.Cfgs[i].ID, applied: c.Applied[i]}
		if ctl != nil {
			m.node = ctl.Node()
		}
		out[i] = m
	}
	return out
}
