package raft_test

// Raft's Figure 8 under an honest power loss (docs/upstream.md U11, "The
// first entry of a term"). An entry of an earlier term is committed only
// through an entry of the leader's own term, and "on a majority" means on
// a majority's disks, the leader's included. The leader's appends are
// deferred (it replicates while its fsync is pending), and hashicorp/raft
// counts the leader as soon as its store returns. If the first entry of a
// term — the new leader's no-op — were deferred too, raft would count it
// from memory, commit the earlier-term entry beneath it, and the member
// would apply it and tell a follower it is committed; a power loss before
// the no-op's fsync then lets a later leader overwrite it.
//
// The test builds that interleaving on real files and TCP, with the power
// loss made honest: a checkpoint of A's log when its fsyncs are held (from
// then on nothing of A's log reaches its disk), restored after A stops.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

func isSegment(name string) bool { return strings.HasSuffix(name, ".seg") }

// termOf is the term of the entry at index in member i's log (0: none).
func termOf(c *clustertest.NodeCluster, i int, index uint64) uint64 {
	var l hraft.Log
	if err := c.Nodes[i].Log().GetLog(index, &l); err != nil {
		return 0
	}
	return l.Term
}

func TestFigure8PowerLossNeverAppliesAnEarlierTermEntry(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("faultnet seed %d", seed)
	net := faultnet.New(seed)
	var ffs [3]*faultfs.FS
	// Longer timeouts than the package's: an isolated leader must append X
	// before its lease ends, and a loaded machine must not depose the
	// leaders this test elects on purpose.
	c := clustertest.StartNodesWAL(t, 3, net, func(cfg *raft.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	}, func(i int) []wal.Option {
		ffs[i] = faultfs.New(wal.OSFS{})
		return []wal.Option{wal.WithFS(ffs[i])}
	})
	a := c.WaitLeader(wait)
	for i := 0; i < 3; i++ {
		if _, err := c.Propose(a, fmt.Sprintf("warm%d=v", i), wait); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(wait)
	b, w := (a+1)%3, (a+2)%3 // w: the member whose vote elects twice (C in docs/upstream.md)
	addr := func(i int) hraft.ServerAddress { return hraft.ServerAddress(c.Cfgs[i].BindAddr) }
	ck := filepath.Join(t.TempDir(), "a-log-at-the-hold")
	logDir := filepath.Join(c.Cfgs[a].DataDir, "log")

	// 1. Term a: A, cut off, appends X at k; only A's disk holds it.
	termA := c.Nodes[a].Status().Term
	k := c.Nodes[a].Status().LastIndex + 1
	net.Isolate(addr(a))
	xDone := proposeAsync(c, a, "x=1")
	clustertest.WaitFor(t, wait, "X on the cut-off leader's disk", func() bool {
		return termOf(c, a, k) == termA && c.Nodes[a].Log().Durable() >= k
	})

	// 2. Term b: B wins with C's vote; its no-op Y at k reaches nobody (its
	// appends to C are cut, and C cannot win: its votes to B are cut).
	net.CutKind(addr(b), addr(w), faultnet.KindAppendEntries)
	net.CutKind(addr(w), addr(b), faultnet.KindRequestPreVote)
	net.CutKind(addr(w), addr(b), faultnet.KindRequestVote)
	var termB uint64
	clustertest.WaitFor(t, wait, "B's no-op of a later term at k on B's disk", func() bool {
		termB = termOf(c, b, k)
		return termB > termA && c.Nodes[b].Log().Durable() >= k
	})
	if last := c.Nodes[w].Status().LastIndex; last >= k {
		t.Fatalf("setup: C holds index %d, only A and B may hold k=%d", last, k)
	}
	c.StopMember(b)

	// 3. Term c: A's fsyncs are held (the checkpoint is what its disk will
	// hold after the power loss: nothing it writes from now on is synced),
	// and A is elected again with C's vote.
	if err := ffs[a].Checkpoint(logDir, ck, isSegment); err != nil {
		t.Fatal(err)
	}
	synced := ffs[a].Syncs()
	release := ffs[a].HoldSyncs()
	defer release()
	net.Heal()
	clustertest.WaitFor(t, wait, "A to lead again in a later term", func() bool {
		s := c.Nodes[a].Status()
		return s.Role == "Leader" && s.Term > termB
	})
	clustertest.WaitFor(t, wait, "A's replication to give C the entry X", func() bool {
		return termOf(c, w, k) == termA
	})
	readDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Nodes[a].LinearizableRead(ctx)
		if err == nil {
			if v, ok := c.KVs[a].Get("x"); ok {
				err = fmt.Errorf("a linearizable read on A served x=%s", v)
			} else {
				err = fmt.Errorf("a linearizable read on A was served while its term's first entry was only in memory")
			}
			readDone <- err
			return
		}
		readDone <- nil
	}()
	holdsFor(t, 2*time.Second, "while A's no-op is only in its memory", func() error {
		for _, i := range []int{a, w} {
			s := c.Nodes[i].Status()
			if s.AppliedIndex >= k {
				return fmt.Errorf("m%d applied index %d: the earlier-term entry X at %d", i, s.AppliedIndex, k)
			}
			if s.Floor >= k || s.PersistedFloor >= k {
				return fmt.Errorf("m%d's commit floor is %d (persisted %d): X at %d counted as committed", i, s.Floor, s.PersistedFloor, k)
			}
		}
		if ci := c.Nodes[w].Raft().CommitIndex(); ci >= k {
			return fmt.Errorf("C was told commit index %d: X at %d", ci, k)
		}
		select {
		case err := <-readDone:
			if err != nil {
				return err
			}
			readDone <- nil
		default:
		}
		return nil
	})
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}

	// 4. A loses power before its no-op's fsync: nothing leaves it any
	// more, and its log goes back to what its disk held at the hold.
	net.Isolate(addr(a))
	if got := ffs[a].Syncs(); got != synced {
		t.Fatalf("setup: A's log synced %d times during the hold: the checkpoint is not what its disk holds", got-synced)
	}
	release()
	c.StopMember(a)
	if err := faultfs.Restore(logDir, ck, isSegment); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ck); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-xDone:
		if err == nil {
			t.Fatal("the proposal of X was acknowledged, yet X was never on a majority's disks")
		}
	default:
	}

	// 5. A restarts with (k, term a) and votes for B, whose (k, term b) is
	// newer; C is cut off, so B commits Y with A and overwrites X there.
	net.Heal()
	net.Isolate(addr(w))
	c.StartMember(a)
	c.StartMember(b)
	clustertest.WaitFor(t, wait, "B to lead with A's vote", func() bool {
		return c.Nodes[b].Status().Role == "Leader"
	})
	if _, err := c.Propose(b, "y=2", wait); err != nil {
		t.Fatal(err)
	}
	c.WaitConvergedOf(wait, a, b)

	// 6. C comes back: it must cut X (never committed) and converge; no
	// member may ever have applied X (the applied-history checker runs on
	// every convergence poll).
	net.Heal()
	c.WaitConverged(wait)
	if v := c.CheckApplied(true); len(v) > 0 {
		t.Fatalf("applied history:\n%s", clustertest.ViolationReport(v))
	}
	for i := range c.Nodes {
		if v, ok := c.KVs[i].Get("x"); ok {
			t.Fatalf("m%d holds x=%s, an entry a later leader overwrote", i, v)
		}
		if got := termOf(c, i, k); got != termB {
			t.Fatalf("m%d holds term %d at %d, want B's no-op of term %d", i, got, k, termB)
		}
	}
}
