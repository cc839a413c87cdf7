package raft_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
)

// Leadership churn under a scheduling stall. A leader that does not hear
// from a quorum for LeaderLeaseTimeout steps down: legal Raft, and what
// it must do. On a saturated machine the test process itself can stand
// still long enough for that (every member runs in it: heartbeats are
// neither sent nor answered while it is stopped). So "the leader kept its
// term" and "no term change" are asserted only when no measured stall
// explains a loss; safety (election safety, acked-set, committed prefix)
// is asserted strictly whatever happened.
//
// A stall explains a lost lease when the process stood still for at least
// half a lease within one lease-long stretch (stalltest.Worst): of the
// heartbeat round trips due in that stretch (one per HeartbeatTimeout/10),
// at most half a lease was left for all of them, under -race on shared
// cores. The threshold is a judgement, printed with every verdict.

// leaseOf returns the members' LeaderLeaseTimeout.
func leaseOf(c *clustertest.NodeCluster) time.Duration { return c.Cfgs[0].LeaderLeaseTimeout }

// churnExplained reports whether the stalls measured in [from, to) explain
// a leader losing its lease, and describes what was measured. The search
// starts two leases before from: a lease lost just after from ran out
// during that time.
func churnExplained(from, to time.Time, lease time.Duration) (bool, string) {
	from = from.Add(-2 * lease)
	worst := stalltest.Worst(from, to, lease)
	return worst >= lease/2, fmt.Sprintf("worst stall %v within a %v lease stretch (explains a lost lease from %v); %v over %v",
		worst.Round(time.Millisecond), lease, lease/2, stalltest.Between(from, to), to.Sub(from).Round(time.Millisecond))
}

// checkChurn fails with msg unless the stalls measured in [from, to)
// explain the churn it describes; when they do, it logs why it is legal.
func checkChurn(t *testing.T, from, to time.Time, lease time.Duration, msg string) {
	t.Helper()
	if ok, why := churnExplained(from, to, lease); ok {
		t.Logf("%s: a leader missed its lease under a measured stall, legal Raft (%s)", msg, why)
	} else {
		t.Errorf("%s, and no measured stall explains it (%s)", msg, why)
	}
}

// holdLeader keeps a fault in place for d while watching that member ld
// stays leader in term; a loss is checked with checkChurn (the loss must
// be explained by a stall measured before it was seen), and the hold lasts
// d either way. It reports whether the leader kept its term.
func holdLeader(t *testing.T, c *clustertest.NodeCluster, ld int, term uint64, d time.Duration, what string) bool {
	t.Helper()
	stalltest.Watch()
	start := time.Now()
	var lost error
	var lostAt time.Time
	_ = hold(d, func() error {
		if lost == nil {
			if s := c.Nodes[ld].Status(); s.Role != "Leader" || s.Term != term {
				lost, lostAt = fmt.Errorf("leader m%d lost its leadership (role %s, term %d, was %d)", ld, s.Role, s.Term, term), time.Now()
			}
		}
		return nil
	})
	if lost == nil {
		return true
	}
	checkChurn(t, start, lostAt, leaseOf(c), fmt.Sprintf("%s: %v after %v", what, lost, lostAt.Sub(start).Round(time.Millisecond)))
	return false
}

// leadership is who led a cluster when an operation started.
type leadership struct {
	ld   int // -1: nobody
	term uint64
	at   time.Time
}

func leadershipOf(c *clustertest.NodeCluster) leadership {
	l := leadership{ld: c.Leader(), at: time.Now()}
	if l.ld >= 0 {
		l.term = c.Nodes[l.ld].Status().Term
	}
	return l
}

// excuse accepts err, the failure of an operation started under l, only
// as an outcome left unknown by a leadership change since l, which
// checkChurn must find explained by a measured stall; it then waits for a
// leader. Any other failure fails the test now.
func (l leadership) excuse(t *testing.T, c *clustertest.NodeCluster, err error, what string) {
	t.Helper()
	moved := l.ld >= 0 && (c.Nodes[l.ld] == nil || c.Nodes[l.ld].Status().Role != "Leader" || c.Nodes[l.ld].Status().Term != l.term)
	if !errors.Is(err, raft.ErrIndeterminate) || !moved {
		t.Fatalf("%s: %v", what, err)
	}
	checkChurn(t, l.at, time.Now(), leaseOf(c), fmt.Sprintf("%s: %v", what, err))
	c.WaitLeader(wait)
}

// proposeAcrossChurn proposes cmd on member i until it commits; an attempt
// excused by a leadership change (leadership.excuse) is proposed again.
// cmd must be idempotent (a KV set). retried reports a second attempt: its
// result may then show the first attempt's effect.
func proposeAcrossChurn(t *testing.T, c *clustertest.NodeCluster, i int, cmd string, d time.Duration) (res raft.Result, retried bool) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		l := leadershipOf(c)
		res, err := c.Propose(i, cmd, d)
		if err == nil {
			return res, attempt > 0
		}
		if attempt == 3 {
			t.Fatalf("propose %q on m%d, attempt %d: %v", cmd, i, attempt+1, err)
		}
		l.excuse(t, c, err, fmt.Sprintf("propose %q on m%d", cmd, i))
	}
}

// holdRunning keeps a fault in place for d of the process's running time:
// the wall time minus the scheduling stalls measured meanwhile (at most
// 3×d of wall time). A "progress in every stretch of d" check is a
// liveness bound and must not count time the process stood still. It
// returns the stall measured over the hold.
func holdRunning(d time.Duration) stalltest.Stall {
	w := stalltest.Start()
	_ = hold(d, nil)
	for !w.Exceeded(d) && w.Elapsed() < 3*d {
		_ = hold(10*time.Millisecond, nil)
	}
	return w.Stall()
}
