package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	jraft "github.com/jobraft/jobraft/raft"
)

// bareCluster is what a user would build on hashicorp/raft directly: three
// members over raft's own TCP transport on loopback, raft-boltdb/v2 as log
// and stable store (fsync on every append), hashicorp/raft's default
// timing (1 s heartbeat and election) with jobraft's batching settings,
// and a small queue state machine, one raft entry per operation.
type bareCluster struct {
	rafts  []*hraft.Raft
	stores []*raftboltdb.BoltStore
	trans  []*hraft.NetworkTransport
}

func startBare(dir string, addrs []string) (*bareCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &bareCluster{}
	var servers []hraft.Server
	for i, addr := range addrs {
		tr, err := hraft.NewTCPTransport(addr, nil, 8, 10*time.Second, io.Discard)
		if err != nil {
			c.close()
			return nil, err
		}
		c.trans = append(c.trans, tr)
		st, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, fmt.Sprintf("bare%d.db", i))})
		if err != nil {
			c.close()
			return nil, err
		}
		c.stores = append(c.stores, st)
		servers = append(servers, hraft.Server{ID: hraft.ServerID(fmt.Sprint("b", i)), Address: tr.LocalAddr()})
	}
	for i := range addrs {
		cfg := hraft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.CommitTimeout = jraft.DefaultCommitTimeout
		cfg.MaxAppendEntries, cfg.BatchApplyCh = 256, true
		cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<30
		cfg.Logger = hclog.NewNullLogger()
		r, err := hraft.NewRaft(cfg, newQueueFSM(), c.stores[i], c.stores[i], hraft.NewDiscardSnapshotStore(), c.trans[i])
		if err != nil {
			c.close()
			return nil, err
		}
		c.rafts = append(c.rafts, r)
		if err := r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil {
			c.close()
			return nil, err
		}
	}
	if err := waitUntil(30*time.Second, func() bool { return c.leader() != nil }); err != nil {
		c.close()
		return nil, fmt.Errorf("bare raft: no leader: %w", err)
	}
	return c, nil
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
	for _, r := range c.rafts {
		_ = r.Shutdown().Error()
	}
	for _, t := range c.trans {
		_ = t.Close()
	}
	for _, s := range c.stores {
		_ = s.Close()
	}
}

// apply proposes cmd on the leader and returns the state machine's answer.
func (c *bareCluster) apply(cmd []byte) ([]byte, error) {
	r := c.leader()
	if r == nil {
		return nil, errors.New("bare raft: no leader")
	}
	f := r.Apply(cmd, 10*time.Second)
	if err := f.Error(); err != nil {
		return nil, err
	}
	out, _ := f.Response().([]byte)
	return out, nil
}

// submit: one entry.
func (c *bareCluster) submit(id string, payload []byte) error {
	_, err := c.apply(encodeOp(opSubmit, id, payload))
	return err
}

// cycle: submit, claim, ack: three entries, as a user of bare raft would
// replicate them.
func (c *bareCluster) cycle(ctx context.Context, id string, payload []byte) error {
	if err := c.submit(id, payload); err != nil {
		return err
	}
	var got []byte
	for {
		var err error
		if got, err = c.apply(encodeOp(opClaim, "", nil)); err != nil {
			return err
		}
		if len(got) > 0 {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	_, err := c.apply(encodeOp(opAck, string(got), nil))
	return err
}

// The queue state machine's operations: a byte, a length-prefixed ID, the
// payload.
const (
	opSubmit byte = 1
	opClaim  byte = 2
	opAck    byte = 3
)

func encodeOp(op byte, id string, payload []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(id)+len(payload))
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return append(b, payload...)
}

// queueFSM: pending jobs in FIFO order, claimed jobs until acked.
type queueFSM struct {
	mu      sync.Mutex
	jobs    map[string][]byte
	pending []string
	claimed map[string]bool
}

func newQueueFSM() *queueFSM {
	return &queueFSM{jobs: map[string][]byte{}, claimed: map[string]bool{}}
}

func (f *queueFSM) Apply(l *hraft.Log) interface{} {
	if len(l.Data) < 2 {
		return nil
	}
	n, k := binary.Uvarint(l.Data[1:])
	if k <= 0 || uint64(len(l.Data)-1-k) < n {
		return nil
	}
	id := string(l.Data[1+k : 1+k+int(n)])
	payload := l.Data[1+k+int(n):]
	f.mu.Lock()
	defer f.mu.Unlock()
	switch l.Data[0] {
	case opSubmit:
		if _, ok := f.jobs[id]; !ok {
			f.jobs[id] = bytes.Clone(payload)
			f.pending = append(f.pending, id)
		}
	case opClaim:
		if len(f.pending) == 0 {
			return []byte(nil)
		}
		id := f.pending[0]
		f.pending = f.pending[1:]
		f.claimed[id] = true
		return []byte(id)
	case opAck:
		if f.claimed[id] {
			delete(f.claimed, id)
			delete(f.jobs, id)
		}
	}
	return nil
}

func (f *queueFSM) Snapshot() (hraft.FSMSnapshot, error) {
	return nil, errors.New("bare raft: no snapshots in the benchmark")
}
func (f *queueFSM) Restore(io.ReadCloser) error {
	return errors.New("bare raft: no snapshots in the benchmark")
}

var _ hraft.FSM = (*queueFSM)(nil)
