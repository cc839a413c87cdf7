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

	var mu sync.Mutex
	var results []submitOutcome
	submit := func(m int, tag string, d time.Duration) string {
		rep, err := p.CallT(m, "/submit", ctltest.Request{Queue: "fz", Payload: tag}, d)
		out := rep.Outcome
		if err != nil {
			out = "no_reply"
		}
		mu.Lock()
		results = append(results, submitOutcome{tag, out})
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
	var probes []*frozenProbe
	for _, m := range []int{(l + 1) % 3, (l + 2) % 3} {
		probes = append(probes, &frozenProbe{what: "a fresh submit", m: m, try: func(n int) bool {
			return submit(m, fmt.Sprintf("probe%d-%d", m, n), 15*time.Second) == ctltest.OutcomeOK
		}})
	}
	runFrozenProbes(t, paused, l, probes)
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
	checkExactlyOnce(t, results, seen)
}

// frozenProbe is one live member's probe: try is called until it succeeds.
type frozenProbe struct {
	what  string
	m     int
	try   func(n int) bool
	took  time.Duration
	stall stalltest.Stall
}

// runFrozenProbes runs the probes concurrently and asserts each succeeded
// within frozenBound of the pause (widened by the stall measured meanwhile).
func runFrozenProbes(t *testing.T, paused stalltest.Window, l int, probes []*frozenProbe) {
	t.Helper()
	var running sync.WaitGroup
	for _, pr := range probes {
		running.Add(1)
		go func() {
			defer running.Done()
			for n := 0; paused.Elapsed() < wait; n++ {
				if pr.try(n) {
					pr.took, pr.stall = paused.Elapsed(), paused.Stall()
					return
				}
			}
			pr.took = -1
		}()
	}
	running.Wait()
	for _, pr := range probes {
		t.Logf("p%d answered %s %v after the leader p%d froze (%v)", pr.m, pr.what, pr.took.Round(time.Millisecond), l, pr.stall)
		if pr.took < 0 || pr.took > frozenBound+pr.stall.Total {
			t.Errorf("p%d: first %s answered after %v; bound %v + %v", pr.m, pr.what, pr.took.Round(time.Millisecond), frozenBound, pr.stall)
		}
	}
}

// The leader process is SIGSTOPped while nothing else runs. Each live
// member answers a linearizable read sent after the pause (its read index
// is asked of the leader it knows: the frozen one until it learns of the
// next) within frozenBound, widened by the measured stall.
func TestFrozenLeaderReadsResume(t *testing.T) {
	p := ctltest.StartProcs(t, 3, func(_ int, mc *ctltest.MemberConfig) {
		mc.Timing = ctltest.Timing{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond, ProposeTimeout: 10 * time.Second}
	})
	l := p.WaitLeader(wait)
	p.WaitConverged(wait)
	// A read on every member first: each follower's connection to the
	// leader is open (pooled) when the leader freezes.
	for i := 0; i < 3; i++ {
		if rep, err := p.CallT(i, "/get", ctltest.Request{ID: "none"}, wait); err != nil || rep.Outcome != ctltest.OutcomeOK {
			t.Fatalf("read on p%d before the pause: %v %+v", i, err, rep)
		}
	}
	stalltest.Watch()
	p.Pause(l)
	paused := stalltest.Start()
	defer p.Resume(l)
	var probes []*frozenProbe
	for _, m := range []int{(l + 1) % 3, (l + 2) % 3} {
		probes = append(probes, &frozenProbe{what: "a linearizable read", m: m, try: func(int) bool {
			rep, err := p.CallT(m, "/get", ctltest.Request{ID: "none"}, 15*time.Second)
			return err == nil && rep.Outcome == ctltest.OutcomeOK
		}})
	}
	runFrozenProbes(t, paused, l, probes)
}
