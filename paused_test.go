package jobraft_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/ctltest"
)

// A worker process (a follower member holding a lease) is SIGSTOPped past
// its lease. The leader expires the lease, another member claims and acks
// the job; when the paused process resumes, its late ack is refused as
// stale and the job keeps the second worker's result.
func TestPausedWorkerLateAckRefused(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	p := ctltest.StartProcs(t, 3, func(_ int, mc *ctltest.MemberConfig) { mc.LeaseTTL = ttl })
	l := p.WaitLeader(wait)
	w1, w2 := (l+1)%3, (l+2)%3
	rep, err := p.CallT(l, "/submit", ctltest.Request{Queue: "pw", Payload: "x"}, wait)
	if err != nil || rep.Outcome != ctltest.OutcomeOK {
		t.Fatalf("submit: %v %+v", err, rep)
	}
	id := rep.Job.ID
	rep, err = p.CallT(w1, "/claim", ctltest.Request{Queue: "pw", Worker: "paused", TTL: ttl}, wait)
	if err != nil || len(rep.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, rep)
	}
	first := rep.Jobs[0]
	claimed := time.Now()
	p.Pause(w1)
	resumed := false
	defer func() {
		if !resumed {
			p.Resume(w1)
		}
	}()
	// The job runs again elsewhere.
	rep, err = p.CallT(w2, "/claim", ctltest.Request{Queue: "pw", Worker: "second", TTL: 10 * time.Second, Wait: 15 * time.Second}, wait)
	if err != nil || len(rep.Jobs) != 1 {
		t.Fatalf("second claim: %v %+v", err, rep)
	}
	second := rep.Jobs[0]
	if since := time.Since(claimed); since < ttl {
		t.Fatalf("lease reclaimed %v after the claim, TTL %v", since, ttl)
	}
	if second.ID != id || second.Token <= first.Token || second.Attempts != 2 {
		t.Fatalf("second lease %+v, first %+v", second, first)
	}
	if rep, err := p.CallT(w2, "/ack", ctltest.Request{ID: id, Token: second.Token, Result: "second"}, wait); err != nil || rep.Outcome != ctltest.OutcomeOK {
		t.Fatalf("second ack: %v %+v", err, rep)
	}
	p.Resume(w1)
	resumed = true
	rep, err = p.CallT(w1, "/ack", ctltest.Request{ID: id, Token: first.Token, Result: "late"}, wait)
	if err != nil || rep.Outcome != ctltest.OutcomeStale {
		t.Fatalf("late ack from the resumed worker: %v %+v", err, rep)
	}
	rep, err = p.CallT(w1, "/get", ctltest.Request{ID: id}, wait)
	if err != nil || rep.Job == nil || rep.Job.State != "succeeded" || rep.Job.Result != "second" {
		t.Fatalf("job after both acks: %v %+v", err, rep.Job)
	}
	p.WaitConverged(wait)
	p.CheckApplied(true)
}
