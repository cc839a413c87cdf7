package raft_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
)

// A leader stops. The follower whose timer fires asks the other for its
// (pre-)vote; the other still knows the stopped leader, as hashicorp/raft
// keeps it until its own election timer fires — 30 s here, for m2 alone —
// but has not heard from it for its stickiness (set here to the others'
// heartbeat timeout, which it is in a cluster of one configuration): the
// seam lets the requests past raft's leader stickiness, m2 votes, and the
// survivors elect a leader well within m2's own timeout (docs/upstream.md
// U13). Without the correction m2 refuses every request "since we have a
// leader" and no leader is elected before its timer fires.
func TestSilentLeaderDoesNotHoldTheElection(t *testing.T) {
	const slow = 30 * time.Second // m2's own heartbeat and election timeouts
	c := nodetest.Start(t, 3, nil, func(cfg *raft.Config) {
		if cfg.ID == "m2" {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = slow, slow
		}
	})
	c.Nodes[2].SetStickinessForTest(c.Cfgs[0].HeartbeatTimeout)
	l := c.WaitLeader(wait) // m0 or m1: m2 does not campaign within its 30 s
	if l == 2 {
		t.Fatalf("m2 (election timeout %v) led first", slow)
	}
	proposeN(t, c, l, "before-", 5)
	c.WaitConverged(wait)
	x := 1 - l
	old := c.Nodes[l].Status().Term
	c.StopMember(l)
	start := time.Now()
	// A liveness bound well below m2's own timer (WaitFor widens it by
	// measured stalls; the counter below is what proves the vote's path).
	nodetest.WaitFor(t, slow/2, "m"+string(rune('0'+x))+" elected with m2's vote", func() bool {
		return c.Leader() == x && c.Nodes[x].Status().Term > old
	})
	t.Logf("m%d leads term %d, %v after the leader (term %d) stopped", x, c.Nodes[x].Status().Term, time.Since(start).Round(time.Millisecond), old)
	st := c.Nodes[2].Status()
	if st.Seam.StickinessLifted == 0 {
		t.Fatalf("m2 voted without the seam lifting raft's leader stickiness (its timer fired?): %+v", st.Seam)
	}
	t.Logf("m2's seam: %d (pre-)vote requests let past the silent leader's stickiness", st.Seam.StickinessLifted)
	proposeN(t, c, x, "after-", 5) // commits on m2 with the new leader
	c.WaitConvergedOf(wait, x, 2)
}
