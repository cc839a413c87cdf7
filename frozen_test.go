package jobraft_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/ctltest"
	"github.com/jobraft/jobraft/internal/stalltest"
)

// frozenBound is how soon after the leader's SIGSTOP every live member
// accepts a fresh submit, with a 1 s heartbeat and election timeout: a new
// leader is elected in about 1-3 s, and what a member had forwarded to the
// frozen leader ends as soon as it learns of the new one and is retried
// there by ID. (Without that, forwarded submits waited for the 10 s
// propose timeout.)
const frozenBound = 4 * time.Second

// The leader process is SIGSTOPped while clients submit on every member.
// Each live member accepts a fresh submit (sent after the pause) within
// frozenBound, widened by the measured stall of this process. After SIGCONT
// every acknowledged submit exists exactly once, none reported not
// submitted exists, and none exists twice.
func TestFrozenLeaderSubmitsResume(t *testing.T) {
	p := ctltest.StartProcs(t, 3, func(_ int, mc *ctltest.MemberConfig) {
		mc.Timing = ctltest.Timing{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond, ProposeTimeout: 10 * time.Second}
	})
	l := p.WaitLeader(wait)
	stalltest.Watch()

	type result struct{ tag, outcome string }
	var mu sync.Mutex
	var results []result
	submit := func(m int, tag string, d time.Duration) string {
		rep, err := p.CallT(m, "/submit", ctltest.Request{Queue: "fz", Payload: tag}, d)
		out := rep.Outcome
		if err != nil {
			out = "no_reply"
		}
		mu.Lock()
		results = append(results, result{tag, out})
		mu.Unlock()
		return out
	}
	// Background load on the live members: forwarded batches are in flight
	// when the leader stops.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		m := (l + 1 + c%2) % 3
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				submit(m, fmt.Sprintf("load%d-%d", c, n), 15*time.Second)
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(results) }
	ctltest.WaitFor(t, wait, "submits before the pause", func() bool { return count() >= 100 })

	p.Pause(l)
	paused := stalltest.Start()
	resumed := false
	defer func() {
		if !resumed {
			p.Resume(l)
		}
	}()
	// Each live member: fresh submits, one at a time, until one succeeds.
	took := make([]time.Duration, 3)
	stalls := make([]stalltest.Stall, 3)
	var probes sync.WaitGroup
	for _, m := range []int{(l + 1) % 3, (l + 2) % 3} {
		probes.Add(1)
		go func() {
			defer probes.Done()
			for n := 0; paused.Elapsed() < wait; n++ {
				if submit(m, fmt.Sprintf("probe%d-%d", m, n), 15*time.Second) == ctltest.OutcomeOK {
					took[m] = paused.Elapsed()
					stalls[m] = paused.Stall()
					return
				}
			}
			took[m] = -1
		}()
	}
	probes.Wait()
	for _, m := range []int{(l + 1) % 3, (l + 2) % 3} {
		t.Logf("p%d accepted a fresh submit %v after the leader p%d froze (%v)", m, took[m].Round(time.Millisecond), l, stalls[m])
		if took[m] < 0 || took[m] > frozenBound+stalls[m].Total {
			t.Errorf("p%d: first fresh submit accepted after %v; bound %v + %v", m, took[m].Round(time.Millisecond), frozenBound, stalls[m])
		}
	}
	// The old leader stays frozen (at least 8 s) under the new one's load.
	before := count()
	ctltest.WaitFor(t, wait, "submits under the new leader", func() bool {
		return count() >= before+100 && paused.Elapsed() >= 8*time.Second
	})
	p.Resume(l)
	resumed = true
	close(stop)
	wg.Wait()
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	p.CheckApplied(true)

	rep, err := p.CallT(l, "/list", ctltest.Request{Queue: "fz"}, 10*time.Second)
	if err != nil || rep.Outcome != ctltest.OutcomeOK {
		t.Fatalf("list: %v %+v", err, rep.Error)
	}
	seen := map[string]int{}
	for _, j := range rep.Jobs {
		seen[j.Payload]++
	}
	tally := map[string]int{}
	for _, r := range results {
		tally[r.outcome]++
		n := seen[r.tag]
		switch r.outcome {
		case ctltest.OutcomeOK:
			if n != 1 {
				t.Errorf("acked submit %s exists %d times", r.tag, n)
			}
		case ctltest.OutcomeNotSubmitted:
			if n != 0 {
				t.Errorf("submit %s reported not submitted exists %d times", r.tag, n)
			}
		default:
			if n > 1 {
				t.Errorf("submit %s (%s) exists %d times", r.tag, r.outcome, n)
			}
		}
		delete(seen, r.tag)
	}
	for tag, n := range seen {
		t.Errorf("unexpected job %s (%d times)", tag, n)
	}
	t.Logf("outcomes: %v", tally)
}
