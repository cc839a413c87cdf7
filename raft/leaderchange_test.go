package raft_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// loadNodes proposes unique keys (prefix-g-k) from workers goroutines,
// round-robin over the members of c at the call, until stop is closed.
func loadNodes(c *clustertest.NodeCluster, prefix string, workers int, l *ledger, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	nodes := append([]*raft.Node(nil), c.Nodes...)
	n := len(nodes)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("%s%d-%d", prefix, g, k)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := nodes[(g+k)%n].Propose(ctx, []byte(key+"=v"))
				cancel()
				l.record(key, err)
			}
		}()
	}
	return &wg
}

func addr(n *raft.Node) hraft.ServerAddress { return hraft.ServerAddress(n.Addr()) }

func dumpAll(c *clustertest.NodeCluster, members ...int) map[string]map[string]clustertest.Entry {
	if len(members) == 0 {
		members = c.Running()
	}
	out := map[string]map[string]clustertest.Entry{}
	for _, i := range members {
		out[c.Cfgs[i].ID] = c.KVs[i].Dump()
	}
	return out
}

// A proposal in flight when leadership changes reports indeterminate, never
// a false success or a false failure. Proposals stream from every member
// (followers forward) while, round after round, the leader either loses its
// outbound links (a one-way cut: its appended entries never reach the
// others, the others elect a new leader, and responses to forwarded
// proposals are lost) or hands leadership over (TransferLeadership in the
// middle of the stream). Every outcome is checked against what every member
// applied afterwards: nil ⇒ applied exactly once; ErrRejected ⇒ not applied;
// ErrIndeterminate ⇒ either.
func TestProposalInFlightAcrossLeaderChange(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 3, faults, nil)
	c.WaitLeader(wait)
	l := newLedger()
	stop := make(chan struct{})
	wg := loadNodes(c, "f", 9, l, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wg.Wait()
		}
	}()
	for round := 0; round < 6; round++ {
		ld := c.WaitLeader(wait)
		term := c.Nodes[ld].Status().Term
		base := l.successes()
		clustertest.WaitFor(t, wait, "acknowledged proposals under the current leader", func() bool { return l.successes() >= base+10 })
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond) // a random fault point
		how := "cut"
		if round%2 == 0 {
			for i, n := range c.Nodes {
				if i != ld {
					faults.Cut(addr(c.Nodes[ld]), addr(n))
				}
			}
		} else {
			how = "transfer"
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			if err := c.Nodes[ld].TransferLeadership(ctx, ""); err != nil {
				t.Logf("round %d: transfer: %v", round, err)
			}
			cancel()
		}
		clustertest.WaitFor(t, wait, "a leader in a higher term", func() bool {
			nl := c.Leader()
			return nl >= 0 && c.Nodes[nl].Status().Term > term
		})
		faults.Heal()
		t.Logf("round %d: %s from m%d (term %d) to m%d (term %d); %d acknowledged so far", round, how, ld, term, c.Leader(), c.Nodes[c.Leader()].Status().Term, l.successes())
	}
	close(stop)
	wg.Wait()
	stopped = true
	c.WaitConverged(wait)
	counts := l.check(t, dumpAll(c))
	checkAppliedHistory(t, c)
	t.Logf("outcomes: %v", counts)
	if counts.Indeterminate == 0 {
		t.Errorf("no proposal was in flight across a leader change in 6 rounds (seed %d): the test did not provoke what it checks", seed)
	}
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
}

// Five members: the leader and one follower are cut off from the other
// three. Proposals on the minority (the leader's own and forwarded ones)
// never report success; the majority elects a leader of a higher term and
// commits; after the heal the minority's uncommitted entries are cut and
// every member converges; nothing rejected was applied.
func TestPartitionedLeaderProposalIndeterminate5(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 5, faults, nil)
	c.WaitLeader(wait)
	l := newLedger()
	for k := 0; k < 10; k++ {
		key := fmt.Sprintf("before%d", k)
		lead := leadershipOf(c)
		_, err := c.Propose(k%5, key+"=v", wait)
		l.record(key, err)
		if err != nil {
			lead.excuse(t, c, err, "propose "+key) // the ledger judges its outcome
		}
	}
	c.WaitConverged(wait)
	ld := c.WaitLeader(wait) // it may have moved under a stall (excused above)
	term := c.Nodes[ld].Status().Term
	f := (ld + 1) % 5
	minority := map[int]bool{ld: true, f: true}
	for i := range c.Nodes {
		if !minority[i] {
			faults.Partition(addr(c.Nodes[ld]), addr(c.Nodes[i]))
			faults.Partition(addr(c.Nodes[f]), addr(c.Nodes[i]))
		}
	}
	var wg sync.WaitGroup
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := ld
			if k%2 == 1 {
				m = f
			}
			key := fmt.Sprintf("minority%d", k)
			_, err := c.Propose(m, key+"=v", 2*time.Second)
			l.record(key, err)
			if err == nil {
				t.Errorf("a proposal on the minority (m%d) reported success", m)
			}
		}()
	}
	wg.Wait()
	var nl int
	clustertest.WaitFor(t, wait, "a leader of a higher term in the majority", func() bool {
		nl = c.Leader()
		return nl >= 0 && !minority[nl] && c.Nodes[nl].Status().Term > term
	})
	for k := 0; k < 10; k++ {
		key := fmt.Sprintf("after%d", k)
		m := (nl + k) % 5
		if minority[m] {
			m = nl
		}
		lead := leadershipOf(c)
		_, err := c.Propose(m, key+"=v", wait)
		l.record(key, err)
		if err != nil {
			lead.excuse(t, c, err, "propose "+key) // the ledger judges its outcome
		}
	}
	faults.Heal()
	c.WaitConverged(wait)
	counts := l.check(t, dumpAll(c))
	checkAppliedHistory(t, c)
	t.Logf("outcomes: %v", counts)
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if s := n.Status(); s.Term <= term {
			t.Errorf("m%d still in term %d after the heal", i, s.Term)
		}
	}
}
