package faultnet

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// counterFSM adds each command (a big-endian uint64) to a sum.
type counterFSM struct {
	mu  sync.Mutex
	sum uint64
	n   uint64 // commands applied
}

func (f *counterFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.Data) == 8 {
		f.sum += binary.BigEndian.Uint64(l.Data)
		f.n++
	}
	return f.sum
}

func (f *counterFSM) state() (sum, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.n
}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	sum, n := f.state()
	return &counterSnap{sum, n}, nil
}

func (f *counterFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum, f.n = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	return nil
}

type counterSnap struct{ sum, n uint64 }

func (s *counterSnap) Persist(sink raft.SnapshotSink) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.sum)
	binary.BigEndian.PutUint64(b[8:], s.n)
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *counterSnap) Release() {}

type node struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	mux   *transport.Mux
	trans raft.Transport
	r     *raft.Raft
	fsm   *counterFSM
}

type cluster struct {
	t     *testing.T
	net   *Network
	nodes []*node
}

// newCluster starts n hashicorp/raft members over real loopback TCP, each
// through its own Mux and a Network-wrapped transport.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("fault network seed %d", seed)
	c := &cluster{t: t, net: New(seed)}
	var servers []raft.Server
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i)
		mux := newTestMux(t, name)
		nt, err := mux.RaftTransport(transport.RaftOptions{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{id: raft.ServerID(name), addr: raft.ServerAddress(mux.Addr()), mux: mux, fsm: &counterFSM{}}
		nd.trans = c.net.Wrap(nd.addr, nt)
		c.nodes = append(c.nodes, nd)
		servers = append(servers, raft.Server{ID: nd.id, Address: nd.addr, Suffrage: raft.Voter})
	}
	for _, nd := range c.nodes {
		logger, _ := testLogger(t, "raft-"+string(nd.id))
		conf := raft.DefaultConfig()
		conf.LocalID = nd.id
		// Short, but with room for -race on a shared 2-core machine.
		conf.HeartbeatTimeout = 300 * time.Millisecond
		conf.ElectionTimeout = 300 * time.Millisecond
		conf.LeaderLeaseTimeout = 250 * time.Millisecond
		conf.CommitTimeout = 10 * time.Millisecond
		conf.Logger = logger
		logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, logs, logs, snaps, nd.trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(conf, nd.fsm, logs, logs, snaps, nd.trans)
		if err != nil {
			t.Fatal(err)
		}
		nd.r = r
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if err := nd.r.Shutdown().Error(); err != nil {
				t.Errorf("shutdown %s: %v", nd.id, err)
			}
		}
		if err := c.net.CheckElectionSafety(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// waitLeader waits until exactly one of among is leader and all of among
// agree on it.
func (c *cluster) waitLeader(among []*node, timeout time.Duration) *node {
	c.t.Helper()
	var leader *node
	waitFor(c.t, timeout, "one agreed leader", func() bool {
		leader = nil
		for _, nd := range among {
			if nd.r.State() == raft.Leader {
				if leader != nil {
					return false
				}
				leader = nd
			}
		}
		if leader == nil {
			return false
		}
		for _, nd := range among {
			if _, id := nd.r.LeaderWithID(); id != leader.id {
				return false
			}
		}
		return true
	})
	return leader
}

// apply commits v through whichever member of among leads, retrying on
// leadership errors until timeout.
func (c *cluster) apply(among []*node, v uint64, timeout time.Duration) {
	c.t.Helper()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	deadline := time.Now().Add(timeout)
	for {
		leader := c.waitLeader(among, time.Until(deadline))
		err := leader.r.Apply(b[:], time.Second).Error()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("apply %d: %v", v, err)
		}
	}
}

// waitConverged waits until every node applied n commands summing to sum.
func (c *cluster) waitConverged(sum, n uint64, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, fmt.Sprintf("all members at sum %d after %d commands", sum, n), func() bool {
		for _, nd := range c.nodes {
			if s, k := nd.fsm.state(); s != sum || k != n {
				return false
			}
		}
		return true
	})
}

func (c *cluster) others(skip *node) []*node {
	var out []*node
	for _, nd := range c.nodes {
		if nd != skip {
			out = append(out, nd)
		}
	}
	return out
}
