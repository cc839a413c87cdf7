package raft_test

// The leader writes its log while it replicates (raft/durable.go): its own
// appends are deferred, so hashicorp/raft counts it towards a commit before
// its disk holds the entry. These tests hold a member's fsyncs (real files,
// wal/faultfs) and check the rules that keep that safe: the leader applies
// only what its own disk holds, tells followers nothing is committed beyond
// it, and a follower still answers an append only once its disk holds it.

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

func startHeldCluster(t *testing.T) (*clustertest.NodeCluster, [3]*faultfs.FS) {
	var ffs [3]*faultfs.FS
	c := clustertest.StartNodesWAL(t, 3, nil, nil, func(i int) []wal.Option {
		ffs[i] = faultfs.New(wal.OSFS{})
		return []wal.Option{wal.WithFS(ffs[i])}
	})
	l := c.WaitLeader(wait)
	for i := 0; i < 3; i++ {
		if _, err := c.Propose(l, fmt.Sprintf("set warm%d v", i), wait); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(wait)
	return c, ffs
}

// proposeAsync proposes on member i and reports the result on the channel.
func proposeAsync(c *clustertest.NodeCluster, i int, cmd string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Propose(i, cmd, wait)
		done <- err
	}()
	return done
}

// holdsFor checks cond on every poll for d (what must stay true while a
// disk is held), failing the test the first time it does not hold.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	for stop := time.Now().Add(d); time.Now().Before(stop); {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		<-time.After(10 * time.Millisecond) // the poll interval
	}
}

func TestLeaderAppliesOnlyWhatItsOwnDiskHolds(t *testing.T) {
	c, ffs := startHeldCluster(t)
	l := c.Leader()
	n := c.Nodes[l]
	release := ffs[l].HoldSyncs()
	defer release()
	durable := n.Log().Durable()
	done := proposeAsync(c, l, "set held v")
	// raft counts the leader as soon as its (deferred) append returns: with
	// one follower's answer its commit index passes the leader's disk.
	clustertest.WaitFor(t, wait, "raft to commit past the leader's durable index", func() bool {
		return n.Raft().CommitIndex() > durable
	})
	entry := n.Raft().CommitIndex()
	holdsFor(t, 500*time.Millisecond, "while the leader's disk holds the entry back", func() error {
		select {
		case err := <-done:
			return fmt.Errorf("the propose returned (%v) before the leader's disk held its entry", err)
		default:
		}
		if d := n.Log().Durable(); d >= entry {
			return fmt.Errorf("the leader's log is durable through %d with its fsync held", d)
		}
		for i, m := range c.Nodes {
			if a := m.AppliedIndex(); a >= entry {
				return fmt.Errorf("m%d applied index %d, the entry only the followers' disks hold", i, a)
			}
			if i != l {
				if ci := m.Raft().CommitIndex(); ci >= entry {
					return fmt.Errorf("follower m%d was told commit index %d, past the leader's durable %d", i, ci, n.Log().Durable())
				}
			}
		}
		return nil
	})
	release()
	if err := <-done; err != nil {
		t.Fatalf("propose after the leader's disk caught up: %v", err)
	}
	c.WaitConverged(wait)
}

// The commit floor the leader's guard persists and reports counts raft's
// commit index only as far as the leader's own disk holds the log: with
// its fsync held, raft commits past the leader's durable index on the
// followers' answers, and the floor (Status.Floor, PersistedFloor, the
// wal's Floor) stays at or below the durable index until the disk catches
// up.
func TestLeadersFloorStaysWithinItsDurableIndex(t *testing.T) {
	c, ffs := startHeldCluster(t)
	l := c.Leader()
	n := c.Nodes[l]
	release := ffs[l].HoldSyncs()
	defer release()
	durable := n.Log().Durable()
	done := proposeAsync(c, l, "set held v")
	clustertest.WaitFor(t, wait, "raft to commit past the leader's durable index", func() bool {
		return n.Raft().CommitIndex() > durable
	})
	entry := n.Raft().CommitIndex()
	holdsFor(t, 500*time.Millisecond, "while the leader's disk holds the entry back", func() error {
		d := n.Log().Durable()
		if d >= entry {
			return fmt.Errorf("the leader's log is durable through %d with its fsync held", d)
		}
		st := n.Status()
		if f := n.Log().Floor(); f > d {
			return fmt.Errorf("the leader's wal floor is %d, past its durable index %d (raft's commit index %d)", f, d, n.Raft().CommitIndex())
		}
		if st.Floor > d || st.PersistedFloor > d {
			return fmt.Errorf("the leader reports floor %d, persisted %d, past its durable index %d", st.Floor, st.PersistedFloor, d)
		}
		return nil
	})
	release()
	if err := <-done; err != nil {
		t.Fatalf("propose after the leader's disk caught up: %v", err)
	}
	clustertest.WaitFor(t, wait, "the leader's floor to reach the entry once its disk holds it", func() bool {
		return n.Log().Floor() >= entry
	})
	c.WaitConverged(wait)
}

func TestFollowerAnswersOnlyWhatItsDiskHolds(t *testing.T) {
	c, ffs := startHeldCluster(t)
	l := c.Leader()
	var releases []func()
	for i := range c.Nodes {
		if i != l {
			releases = append(releases, ffs[i].HoldSyncs())
		}
	}
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	before := c.Nodes[l].Raft().CommitIndex()
	done := proposeAsync(c, l, "set held v")
	clustertest.WaitFor(t, wait, "the leader to append the entry", func() bool {
		last, _ := c.Nodes[l].Log().LastIndex()
		return last > before
	})
	holdsFor(t, 500*time.Millisecond, "while both followers' disks hold the entry back", func() error {
		select {
		case err := <-done:
			return fmt.Errorf("the propose returned (%v) with no follower's disk holding its entry", err)
		default:
		}
		if ci := c.Nodes[l].Raft().CommitIndex(); ci > before {
			return fmt.Errorf("the leader committed index %d on answers of followers whose fsync was held", ci)
		}
		return nil
	})
	for _, r := range releases {
		r()
	}
	if err := <-done; err != nil {
		t.Fatalf("propose after the followers' disks caught up: %v", err)
	}
	c.WaitConverged(wait)
}

// A leader's deferred appends are made durable and applied like any: many
// proposals in parallel, every one answered, every member converged.
func TestDeferredLeaderAppendsConverge(t *testing.T) {
	c, _ := startHeldCluster(t)
	l := c.Leader()
	const n = 200
	errs := make(chan error, n)
	for k := 0; k < n; k++ {
		go func() {
			_, err := c.Propose(l, fmt.Sprintf("set k%d v%d", k, k), wait)
			errs <- err
		}()
	}
	for k := 0; k < n; k++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	idx := c.WaitConverged(wait).Digest.Index
	for i, m := range c.Nodes {
		if d := m.Log().Durable(); d < idx {
			t.Fatalf("m%d applied %d but its log is durable only through %d", i, idx, d)
		}
	}
}
