package jobraft_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A worker process (a follower member holding a lease) is SIGSTOPped past
// its lease. The leader expires the lease, another member claims and acks
// the job; when the paused process resumes, its late ack is refused as
// stale and the job keeps the second worker's result.
func TestPausedWorkerLateAckRefused(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) { mc.LeaseTTL = ttl })
	l := p.WaitLeader(wait)
	w1, w2 := (l+1)%3, (l+2)%3
	rep, err := p.CallT(l, "/submit", clustertest.Request{Queue: "pw", Payload: "x"}, wait)
	if err != nil || rep.Outcome != clustertest.OutcomeOK {
		t.Fatalf("submit: %v %+v", err, rep)
	}
	id := rep.Job.ID
	rep, err = p.CallT(w1, "/claim", clustertest.Request{Queue: "pw", Worker: "paused", TTL: ttl}, wait)
	if err != nil || len(rep.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, rep)
	}
	first := rep.Jobs[0]
	p.Pause(w1)
	resumed := false
	defer func() {
		if !resumed {
			p.Resume(w1)
		}
	}()
	// The job runs again elsewhere.
	rep, err = p.CallT(w2, "/claim", clustertest.Request{Queue: "pw", Worker: "second", TTL: 10 * time.Second, Wait: 15 * time.Second}, wait)
	if err != nil || len(rep.Jobs) != 1 {
		t.Fatalf("second claim: %v %+v", err, rep)
	}
	second := rep.Jobs[0]
	// Timing on the leader's clock, which stamped both leases (the members
	// share this machine's clock): the second lease was granted no earlier
	// than the first one's deadline. (A wall clock started when the claim
	// returned starts late: under load the reply can arrive most of a TTL
	// after the leader stamped the lease.)
	if first.Deadline.IsZero() || first.TTL != ttl {
		t.Fatalf("first lease %+v: no deadline, or TTL not %v", first, ttl)
	}
	if granted := second.Deadline.Add(-second.TTL); granted.Before(first.Deadline) {
		t.Fatalf("lease reclaimed at %v, %v before the first lease's deadline %v",
			granted.Format(time.StampMicro), first.Deadline.Sub(granted), first.Deadline.Format(time.StampMicro))
	}
	if second.ID != id || second.Token <= first.Token || second.Attempts != 2 {
		t.Fatalf("second lease %+v, first %+v", second, first)
	}
	if rep, err := p.CallT(w2, "/ack", clustertest.Request{ID: id, Token: second.Token, Result: "second"}, wait); err != nil || rep.Outcome != clustertest.OutcomeOK {
		t.Fatalf("second ack: %v %+v", err, rep)
	}
	p.Resume(w1)
	resumed = true
	rep, err = p.CallT(w1, "/ack", clustertest.Request{ID: id, Token: first.Token, Result: "late"}, wait)
	if err != nil || rep.Outcome != clustertest.OutcomeStale {
		t.Fatalf("late ack from the resumed worker: %v %+v", err, rep)
	}
	rep, err = p.CallT(w1, "/get", clustertest.Request{ID: id}, wait)
	if err != nil || rep.Job == nil || rep.Job.State != "succeeded" || rep.Job.Result != "second" {
		t.Fatalf("job after both acks: %v %+v", err, rep.Job)
	}
	p.WaitConverged(wait)
	p.RequireApplied(true)
}
