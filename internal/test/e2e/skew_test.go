package e2e_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// Members' clocks differ by seconds (raft.Config.Clock). A lease granted by
// a leader whose clock is behind must not be expired early by a new leader
// whose clock is ahead: it lasts at least its TTL of real time from the
// claim, and is still expired eventually. Both a graceful transfer and a
// stopped leader are covered, in both skew directions.
func TestClockSkewNeverExpiresLeaseEarly(t *testing.T) {
	offsets := []time.Duration{0, -4 * time.Second, 4 * time.Second}
	const ttl = 1500 * time.Millisecond
	cases := []struct {
		name     string
		from, to int
		stop     bool
	}{
		{"behind-to-ahead/transfer", 1, 2, false},
		{"ahead-to-behind/transfer", 2, 1, false},
		{"behind-to-ahead/stop", 1, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) {
				off := offsets[i]
				cfg.Clock = func() time.Time { return time.Now().Add(off) }
				cfg.LeaseTTL = ttl
			})
			lead := func(i int) { makeLeader(t, c, i) }
			lead(tc.from)
			ctx := clustertest.Ctx(t, wait)
			other := 3 - tc.from - tc.to
			j, err := c.Ctls[other].Submit(ctx, jobraft.SubmitRequest{Queue: "s", Kind: "k"})
			if err != nil {
				t.Fatal(err)
			}
			watch, err := c.Ctls[other].Watch(ctx, 0, jobraft.WatchFilter{JobID: j.ID, Kinds: []jobraft.EventKind{jobraft.EventExpired}})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			ls, err := c.Ctls[other].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"s"}, Worker: "w", LeaseTTL: ttl})
			if err != nil || len(ls) != 1 {
				t.Fatal(len(ls), err)
			}
			if tc.stop {
				c.StopMember(tc.from)
				c.WaitLeader(wait)
			} else {
				lead(tc.to)
			}
			// before precedes the leader's stamp, so the real time from it
			// to the expiry bounds the lease's real duration from above:
			// it must still reach the TTL (safety, strict). The wait for
			// the expiry is a liveness bound, widened by measured stalls.
			bound, w := ttl+10*time.Second, stalltest.Start()
			var ev jobraft.Event
			for received := false; !received; {
				select {
				case ev = <-watch:
					received = true
				case <-time.After(100 * time.Millisecond):
					if w.Exceeded(bound) {
						t.Fatalf("lease never expired: %s", w.Report(bound))
					}
				}
			}
			got := time.Since(before)
			if ev.Kind != jobraft.EventExpired {
				t.Fatalf("%+v", ev)
			}
			t.Logf("lease expired %v after the claim was sent (TTL %v), by the leader of index %d", got, ttl, ev.Index)
			if got < ttl {
				t.Fatalf("lease expired after %v of real time, TTL %v", got, ttl)
			}
			if err := ls[0].Ack(ctx, nil); err == nil {
				t.Fatal("ack after expiry accepted")
			}
			c.WaitLeader(wait)
			c.RequireApplied(true)
		})
	}
}

// A claim served by a member whose clock is behind the leader's answers a
// scheduled job the leader's clock says is due: whether it is due is the
// leader's entry time's to decide, not the serving member's clock (chaos
// seed 24: the member's own clock kept the claim off the log and it
// answered empty).
func TestClaimOnMemberWithClockBehindSeesDueJob(t *testing.T) {
	offsets := make([]atomic.Int64, 3)
	c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) {
		cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(offsets[i].Load())) }
	})
	l := c.WaitLeader(wait)
	f := c.Follower()
	offsets[f].Store(int64(-2 * time.Second)) // within the claim's skew tolerance
	ctx := clustertest.Ctx(t, wait)
	runAt := time.Now().Add(300 * time.Millisecond) // on the leader's (true) clock
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: "due", Queue: "skew", Kind: "k", RunAt: runAt})
	if err != nil || j.Job.State != jobraft.StateScheduled {
		t.Fatalf("submit: %+v %v, want scheduled", j, err)
	}
	clustertest.WaitFor(t, wait, "the follower to apply the submit and the job to be due by the leader's clock", func() bool {
		_, err := c.Ctls[f].Get(ctx, "due", jobraft.Local)
		return err == nil && time.Now().After(runAt)
	})
	ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"skew"}, Worker: "w"})
	if err != nil || len(ls) != 1 || ls[0].Job.ID != "due" {
		t.Fatalf("claim on a member whose clock is 2 s behind: %d leases, %v; want the due job", len(ls), err)
	}
}

// A job nak'd under one leader stays due under a next leader whose clock is
// behind: the state machine's time is the log's (fsm/clock.go), which never
// goes backwards (the chaos regression narrative-paused-and-skewed-leader:
// with the leader's stamps alone, the claim below leased nothing until the
// new leader's clock passed the old one's). Watch events carry the same
// log times the job records show.
func TestNakedJobStaysDueUnderSlowerNewLeader(t *testing.T) {
	offsets := []time.Duration{0, -3 * time.Second, 0}
	c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) {
		off := offsets[i]
		cfg.Clock = func() time.Time { return time.Now().Add(off) }
	})
	lead := func(i int) { makeLeader(t, c, i) }
	lead(0)
	ctx := clustertest.Ctx(t, wait)
	if _, err := c.Ctls[0].Submit(ctx, jobraft.SubmitRequest{ID: "n", Queue: "slow", Kind: "k", MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[0].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"slow"}, Worker: "w"})
	if err != nil || len(ls) != 1 {
		t.Fatal(len(ls), err)
	}
	if err := ls[0].Nak(ctx, time.Nanosecond, "again"); err != nil {
		t.Fatal(err)
	}
	lead(1) // its clock is 3 s behind the stamps of the nak
	ls, err = c.Ctls[1].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"slow"}, Worker: "w"})
	if err != nil || len(ls) != 1 || ls[0].Job.ID != "n" {
		t.Fatalf("claim under the slower leader: %d leases, %v; want the nak'd job, due since the nak", len(ls), err)
	}
	if err := ls[0].Ack(ctx, nil); err != nil {
		t.Fatal(err)
	}
	j, err := c.Ctls[1].Get(ctx, "n", jobraft.Linearizable)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.Ctls[1].Watch(ctx, 1, jobraft.WatchFilter{JobID: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for ev := range evs {
		if ev.Kind == jobraft.EventError {
			t.Fatalf("watch: %v", ev.Err)
		}
		if ev.Time.Before(last) {
			t.Fatalf("event %s at %v, before the previous event's %v", ev.Kind, ev.Time, last)
		}
		last = ev.Time
		if ev.Kind == jobraft.EventAcked {
			break
		}
	}
	if !last.Equal(j.Updated) {
		t.Fatalf("the ack's event at %v, the job record's update at %v: want the same log time", last, j.Updated)
	}
}

// makeLeader transfers leadership to member i (again, until it leads) and
// waits for the cluster to see a leader.
func makeLeader(t *testing.T, c *clustertest.CtlCluster, i int) {
	t.Helper()
	clustertest.WaitFor(t, wait, fmt.Sprintf("m%d to lead", i), func() bool {
		l := c.WaitLeader(wait)
		if l == i {
			return true
		}
		_ = c.Ctls[l].Node().TransferLeadership(clustertest.Ctx(t, 2*time.Second), fmt.Sprintf("m%d", i))
		return false
	})
	c.WaitLeader(wait)
}
