package faultnet

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/stalltest"

	"github.com/hashicorp/raft"
)

func TestClusterElectsWithPreVote(t *testing.T) {
	c := newCluster(t, 3)
	for _, nd := range c.nodes {
		pv, ok := nd.trans.(raft.WithPreVote)
		if !ok {
			t.Fatal("wrapped NetworkTransport lost raft.WithPreVote")
		}
		if _, ok := nd.trans.(raft.WithClose); !ok {
			t.Fatal("wrapped transport lost raft.WithClose")
		}
		_ = pv
	}
	c.waitLeader(c.nodes, 5*time.Second)
	// hashicorp/raft exposes no pre-vote flag; the wire shows it: the first
	// election went through RequestPreVote before RequestVote.
	if got := c.net.Stats()[KindRequestPreVote].Sent; got == 0 {
		t.Fatal("no RequestPreVote sent: pre-vote is off")
	}
	for v := uint64(1); v <= 10; v++ {
		c.apply(c.nodes, v, 5*time.Second)
	}
	c.waitConverged(55, 10, 5*time.Second)
	if len(c.net.AppendEntriesSenders()) == 0 {
		t.Fatal("no AppendEntries observed")
	}
}

func TestClusterIsolatedLeaderReplacedThenHealed(t *testing.T) {
	c := newCluster(t, 3)
	old := c.waitLeader(c.nodes, 5*time.Second)
	c.apply(c.nodes, 1, 5*time.Second)
	oldTerm := old.r.CurrentTerm()

	c.net.Isolate(old.addr)
	rest := c.others(old)
	leader := c.waitLeader(rest, 10*time.Second)
	if leader.r.CurrentTerm() <= oldTerm {
		t.Fatalf("new leader %s in term %d, not above %d", leader.id, leader.r.CurrentTerm(), oldTerm)
	}
	c.apply(rest, 2, 5*time.Second)
	// The isolated old leader cannot commit: it steps down once its lease
	// lapses.
	waitFor(t, 5*time.Second, "isolated leader steps down", func() bool { return old.r.State() != raft.Leader })

	c.net.Heal()
	final := c.waitLeader(c.nodes, 10*time.Second)
	c.apply(c.nodes, 3, 5*time.Second)
	c.waitConverged(6, 3, 10*time.Second)
	for _, nd := range c.nodes {
		if nd.r.CurrentTerm() != final.r.CurrentTerm() {
			t.Errorf("%s in term %d, leader %s in %d", nd.id, nd.r.CurrentTerm(), final.id, final.r.CurrentTerm())
		}
	}
}

// A one-way cut from the leader to a follower: the follower stops hearing
// heartbeats and campaigns, but pre-vote contains it: the other follower
// still hears the leader and refuses, the leader's answers are cut, so the
// victim never gets to a real RequestVote (which, with a higher term, would
// depose the leader). The cluster keeps committing without it.
func TestClusterOneWayCutDoesNotDisruptLeader(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.waitLeader(c.nodes, 5*time.Second)
	c.apply(c.nodes, 1, 5*time.Second)
	c.waitConverged(1, 1, 5*time.Second)
	victim := c.others(leader)[0]
	term := victim.r.CurrentTerm()

	before := c.net.StatsFrom(victim.addr)
	stalltest.Watch()
	stall := stalltest.Start()
	c.net.Cut(leader.addr, victim.addr)
	waitFor(t, 10*time.Second, "cut-off follower campaigns several times", func() bool {
		return c.net.StatsFrom(victim.addr)[KindRequestPreVote].Sent >= before[KindRequestPreVote].Sent+4
	})
	if got, was := c.net.StatsFrom(victim.addr)[KindRequestVote].Sent, before[KindRequestVote].Sent; got != was {
		t.Fatalf("cut-off follower sent %d RequestVote: pre-vote did not contain it", got-was)
	}
	if got := victim.r.CurrentTerm(); got != term {
		// Pre-vote is granted only by a member that lost the leader too:
		// legal when the test process stood still for a lease (every member
		// runs in it); a failure otherwise.
		if worst := stall.Worst(250 * time.Millisecond); worst < 125*time.Millisecond {
			t.Fatalf("cut-off follower moved its term from %d to %d (worst scheduling stall %v: none explains it)", term, got, worst)
		}
		t.Logf("cut-off follower moved its term from %d to %d under a measured stall (%v)", term, got, stall.Stall())
		c.net.Heal()
		c.waitConverged(1, 1, 10*time.Second)
		return
	}
	c.apply(c.others(victim), 2, 5*time.Second)
	if sum, n := victim.fsm.state(); n != 1 {
		t.Fatalf("cut-off follower applied new entries: sum %d n %d", sum, n)
	}

	c.net.Heal()
	c.waitConverged(3, 2, 10*time.Second)
}

func TestClusterDropDuplicateDelayFlap(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.waitLeader(c.nodes, 5*time.Second)
	c.net.SetDrop(0.1)
	c.net.SetDuplicate(0.2)
	c.net.SetDelay(2*time.Millisecond, 3*time.Millisecond)
	c.net.Flap(leader.addr, c.others(leader)[0].addr, 40*time.Millisecond)
	var sum uint64
	for v := uint64(1); v <= 20; v++ {
		c.apply(c.nodes, v, 20*time.Second)
		sum += v
	}
	st := c.net.Stats()[KindAppendEntries]
	if st.Refused == 0 || st.Duplicated == 0 {
		t.Fatalf("faults not exercised: %+v", st)
	}
	c.net.Heal()
	c.waitLeader(c.nodes, 10*time.Second)
	c.waitConverged(sum, 20, 10*time.Second)
}
