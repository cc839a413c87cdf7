package raft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// slowReadFS is a snapshot store's file system whose reads of snapshot
// artifacts take delay each (a leader's disk busy with other work):
// reading an artifact of n MiB takes about n × delay. Everything else is
// the operating system's.
type slowReadFS struct {
	snapshot.OSFS
	delay time.Duration
	reads *atomic.Int64 // artifact reads, all members
}

func (s slowReadFS) OpenFile(name string, flag int, perm os.FileMode) (snapshot.File, error) {
	f, err := s.OSFS.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) != 0 || filepath.Base(name) != "state.bin" {
		return f, err
	}
	return slowReadFile{File: f, fs: s}, nil
}

type slowReadFile struct {
	snapshot.File
	fs slowReadFS
}

func (f slowReadFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	time.Sleep(f.fs.delay) // the slow disk itself, not a wait for state
	return f.File.ReadAt(p, off)
}

// A member is added while the leader's snapshot reads are slow: reading
// the leader's snapshot artifact once takes several times NoProgressRounds
// election timeouts. The install counts as progress from its first byte
// (the leader's snapshot store no longer reads the whole artifact before
// it hands out a byte: hashicorp/raft opens the snapshot before it calls
// the transport, so that read used to show no install in progress, and
// the policy gave up with no_progress), so the member is promoted.
func TestSlowSnapshotReadsMemberIsStillPromoted(t *testing.T) {
	const (
		noProgress = 3
		values     = 64
		valueSize  = 64 << 10 // 4 MiB of state: 5 reads of 1 MiB
	)
	var reads atomic.Int64
	// One election timeout per read of 1 MiB: the stream moves at least
	// every two reads (the last chunk is withheld until the read that
	// finds the end of the file), within NoProgressRounds election
	// timeouts, while one read of the whole artifact takes longer.
	delay := clustertest.FastConfig(t, "x", t.TempDir(), "127.0.0.1:0").ElectionTimeout
	slow := slowReadFS{delay: delay, reads: &reads}
	c := clustertest.StartNodesOpts(t, 3, nil, func(cfg *raft.Config) {
		cfg.TrailingLogs = 8
		cfg.CatchUp = catchup.Policy{NoProgressRounds: noProgress}
	}, nil, func(i int) []nodeopt.Option {
		if i >= 3 {
			return nil // the new member's own disk is fast
		}
		return []nodeopt.Option{nodeopt.SnapshotOptions(snapshot.WithFS(slow))}
	})
	l := c.WaitLeader(wait)
	value := strings.Repeat("v", valueSize)
	for k := range values {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("k%d=%s", k, value), wait)
	}
	l = c.WaitLeader(wait)
	if err := c.Nodes[l].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	proposeN(t, c, l, "after", 20) // the log is compacted past the snapshot: an install is needed
	if first := c.Nodes[l].Status().FirstIndex; first <= 1 {
		t.Fatalf("leader log starts at %d: no install would be needed", first)
	}
	et := c.Cfgs[l].ElectionTimeout
	before := reads.Load()
	start := time.Now()
	i := c.Join(l, "m3", 4*wait) // fails the test if the add gives up (ErrStalled)
	took := time.Since(start)
	leader := c.WaitLeader(wait)
	p, ok := progressOf(c.Nodes[leader].Status(), "m3")
	if !ok || p.SnapshotBytesSent == 0 {
		t.Fatalf("m3 was promoted without a snapshot install (progress %+v)", p)
	}
	// The scenario holds: reading the artifact once took longer than the
	// policy's no-progress bound.
	read := time.Duration(reads.Load()-before) * delay
	if bound := noProgress * et; read <= bound {
		t.Fatalf("the leader's artifact reads during the add took %s, not more than NoProgressRounds election timeouts (%s): the test does not test", read, bound)
	}
	waitVoters(t, c, leader, "m0", "m1", "m2", "m3")
	c.WaitConverged(wait)
	if n := c.KVs[i].Len(); n != values+20 {
		t.Fatalf("m3 holds %d keys, want %d", n, values+20)
	}
	t.Logf("m3 promoted after %s; the leader's artifact reads took %s (%d × %s), NoProgressRounds × ET = %s", took, read, reads.Load()-before, delay, noProgress*et)
}
