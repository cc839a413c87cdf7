package raft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/internal/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// slowTimer is m2's own heartbeat and election timeout in the silent-leader
// tests: raft alone keeps a stopped leader that long or longer.
const slowTimer = 30 * time.Second

// startSilentLeader starts three members, m2 with slowTimer timeouts and
// the given stickiness (0: the fast members' heartbeat timeout), commits a few entries, stops the leader (m0 or m1)
// and returns the cluster, the other fast member, the stopped leader's
// term and when it stopped.
func startSilentLeader(t *testing.T, sticky time.Duration) (c *nodetest.Cluster, x int, old uint64, stopped time.Time) {
	t.Helper()
	c = nodetest.Start(t, 3, nil, func(cfg *raft.Config) {
		if cfg.ID == "m2" {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = slowTimer, slowTimer
		}
	})
	if sticky == 0 {
		sticky = c.Cfgs[0].HeartbeatTimeout
	}
	c.Nodes[2].SetStickinessForTest(sticky)
	l := c.WaitLeader(wait) // m0 or m1: m2 does not campaign within its 30 s
	if l == 2 {
		t.Fatalf("m2 (election timeout %v) led first", slowTimer)
	}
	proposeN(t, c, l, "before-", 5)
	c.WaitConverged(wait)
	x = 1 - l
	old = c.Nodes[l].Status().Term
	c.StopMember(l)
	return c, x, old, time.Now()
}

// A leader stops. The follower whose timer fires asks the other for its
// (pre-)vote; the other still knows the stopped leader, as hashicorp/raft
// keeps it until its own election timer fires — 30 s here, for m2 alone —
// but has not heard from it for its stickiness (set here to the others'
// heartbeat timeout, which it is in a cluster of one configuration): the
// seam lets the requests past raft's leader stickiness, m2 votes, and the
// survivors elect a leader well within m2's own timeout (docs/upstream.md
// U13). The control keeps m2's stickiness for an hour, which is raft's
// behaviour: m2 refuses every request "since we have a leader" and no
// leader is elected.
func TestSilentLeaderDoesNotHoldTheElection(t *testing.T) {
	t.Run("lifted", func(t *testing.T) {
		c, x, old, stopped := startSilentLeader(t, 0)
		// A liveness bound well below m2's own timer (WaitFor widens it by
		// measured stalls; the counter below is what proves the vote's path).
		nodetest.WaitFor(t, slowTimer/2, fmt.Sprintf("m%d elected with m2's vote", x), func() bool {
			return c.Leader() == x && c.Nodes[x].Status().Term > old
		})
		t.Logf("m%d leads term %d, %v after the leader (term %d) stopped", x, c.Nodes[x].Status().Term, time.Since(stopped).Round(time.Millisecond), old)
		st := c.Nodes[2].Status()
		if st.Seam.StickinessLifted == 0 {
			t.Fatalf("m2 voted without the seam lifting raft's leader stickiness (its timer fired?): %+v", st.Seam)
		}
		t.Logf("m2's seam: %d (pre-)vote requests let past the silent leader's stickiness", st.Seam.StickinessLifted)
		proposeN(t, c, x, "after-", 5) // commits on m2 with the new leader
		c.WaitConvergedOf(wait, x, 2)
	})
	t.Run("control: raft's stickiness", func(t *testing.T) {
		c, x, _, stopped := startSilentLeader(t, time.Hour)
		// Ten of x's election timeouts: it campaigns several times, and
		// every pre-vote m2 answers is raft's refusal.
		for deadline := stopped.Add(10 * c.Cfgs[x].ElectionTimeout); time.Now().Before(deadline); {
			if l := c.Leader(); l >= 0 {
				t.Fatalf("m%d elected %v after the leader stopped, while m2 (stickiness 1 h, timer %v) still knew it", l, time.Since(stopped), slowTimer)
			}
			<-time.After(10 * time.Millisecond) // poll interval
		}
		if got := c.Nodes[2].Status().Seam.StickinessLifted; got != 0 {
			t.Fatalf("m2 lifted the stickiness %d times with a stickiness of 1 h", got)
		}
	})
}

// A healthy leader keeps its term when one follower stops hearing it (the
// link from the leader to x cut one way): x campaigns, and the other
// follower, which hears the leader every heartbeat interval, never lets
// its requests past the stickiness (docs/upstream.md U13: the lift needs a
// whole heartbeat timeout of silence, and waits on the seam before it
// looks again). A term change is excused only by a measured stall of the
// test process of half a lease (every member runs in it).
func TestHealthyLeaderKeepsItsTermWhenOneFollowerIsCutOff(t *testing.T) {
	faults := faultnet.New(time.Now().UnixNano())
	c := nodetest.Start(t, 3, faults, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "before-", 5)
	c.WaitConverged(wait)
	x, f := (l+1)%3, (l+2)%3
	term := c.Nodes[l].Status().Term
	before := faults.StatsFrom(addr(c.Nodes[x]))[faultnet.KindRequestPreVote].Sent
	stalltest.Watch()
	stall := stalltest.Start()
	c.Faults.Cut(addr(c.Nodes[l]), addr(c.Nodes[x]))
	nodetest.WaitFor(t, wait, "the cut-off follower to campaign several times, or the leadership to move", func() bool {
		return faults.StatsFrom(addr(c.Nodes[x]))[faultnet.KindRequestPreVote].Sent >= before+8 || c.Leader() != l
	})
	st := c.Nodes[l].Status()
	lifted := c.Nodes[f].Status().Seam.StickinessLifted
	if st.Term != term || st.Role != "Leader" || lifted != 0 {
		lease := c.Cfgs[l].LeaderLeaseTimeout
		if worst := stall.Worst(lease); worst < lease/2 {
			t.Fatalf("leader m%d %s in term %d (was term %d), m%d lifted the stickiness %d times; worst scheduling stall %v explains none of it",
				l, st.Role, st.Term, term, f, lifted, worst)
		}
		t.Logf("the leadership moved under a measured stall (%v): term %d -> %d, %d lifts", stall.Stall(), term, st.Term, lifted)
	}
	c.Faults.Heal()
	c.WaitConverged(wait)
}
