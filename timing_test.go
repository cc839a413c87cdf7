package jobraft_test

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
)

var (
	killsFlag  = flag.Int("jobraft.kills", 10, "leader SIGKILLs of TestFailoverWithDefaults (its median is reported)")
	timingFlag = flag.Duration("jobraft.timing", 0, "heartbeat and election timeout of the timing tests instead of the defaults (lease: the same, at most the default ratio); to compare")
	churnFlag  = flag.Duration("jobraft.churn", 8*time.Second, "how long TestNoChurnWithDefaults runs its load")
)

// failoverBound is the goal for the failover median with the default
// timing (docs/timing.md). Under the race detector the member processes
// are race-built and the failover's CPU work (vote, first commit, the
// submit's round trips) several times slower: the bound is then
// raceFailoverBound (measured: a median of 0.9 s on a loaded machine).
const (
	failoverBound     = 600 * time.Millisecond
	raceFailoverBound = 1500 * time.Millisecond
)

// defaultTiming is the library's default raft timing (or -jobraft.timing),
// with the library's default propose timeout (clustertest members otherwise
// run the test timing).
func defaultTiming() clustertest.Timing {
	tm := clustertest.Timing{
		Heartbeat: raft.DefaultHeartbeatTimeout, Election: raft.DefaultElectionTimeout,
		LeaderLease: raft.DefaultLeaderLeaseTimeout, ProposeTimeout: 10 * time.Second,
	}
	if d := *timingFlag; d > 0 {
		tm.Heartbeat, tm.Election = d, d
		tm.LeaderLease = time.Duration(float64(d) * float64(raft.DefaultLeaderLeaseTimeout) / float64(raft.DefaultHeartbeatTimeout))
	}
	return tm
}

// The leader process is SIGKILLed, -jobraft.kills times, each time with a
// fresh submit sent to both survivors at once; the failover is the time
// from the kill to the first of them that succeeds (committed by the new
// leader). Its median, with the default timing, is at most failoverBound;
// each sample is first reduced by this process's measured stall during it
// (a liveness allowance). Between kills the member is restarted and the
// cluster converges.
func TestFailoverWithDefaults(t *testing.T) {
	tm := defaultTiming()
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) { mc.Timing = tm })
	stalltest.Watch()
	var took, allowed []time.Duration
	for k := 0; k < *killsFlag; k++ {
		l := p.WaitLeader(wait)
		p.WaitConverged(wait)
		w := stalltest.Start()
		p.Kill(l)
		type sample struct {
			d     time.Duration
			stall stalltest.Stall
		}
		res := make(chan sample, 2)
		for _, m := range []int{(l + 1) % 3, (l + 2) % 3} {
			go func() {
				for n := 0; w.Elapsed() < wait; n++ {
					rep, err := p.CallT(m, "/submit", clustertest.Request{Queue: "fo", Payload: fmt.Sprintf("k%d-p%d-%d", k, m, n)}, 10*time.Second)
					if err == nil && rep.Outcome == clustertest.OutcomeOK {
						res <- sample{w.Elapsed(), w.Stall()}
						return
					}
				}
				res <- sample{d: -1}
			}()
		}
		first, second := <-res, <-res
		if first.d < 0 {
			first = second
		}
		if first.d < 0 {
			t.Fatalf("kill %d: no survivor accepted a submit within %v", k, wait)
		}
		t.Logf("kill %d: leader p%d SIGKILLed, first submit committed after %v (%v)", k, l, first.d.Round(time.Millisecond), first.stall)
		took = append(took, first.d)
		allowed = append(allowed, max(first.d-first.stall.Total, 0))
		p.Start(l)
	}
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	p.RequireApplied(true)
	slices.Sort(took)
	slices.Sort(allowed)
	med, medAllowed := took[len(took)/2], allowed[len(allowed)/2]
	t.Logf("failover with heartbeat %v, election %v, lease %v over %d kills: median %v (min %v, max %v); less measured stalls: median %v",
		tm.Heartbeat, tm.Election, tm.LeaderLease, len(took), med.Round(time.Millisecond), took[0].Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), medAllowed.Round(time.Millisecond))
	bound := failoverBound
	if raceEnabled {
		bound = raceFailoverBound
	}
	if *timingFlag == 0 && medAllowed > bound {
		t.Errorf("failover median %v (less measured stalls) above %v (race detector: %v)", medAllowed.Round(time.Millisecond), bound, raceEnabled)
	}
}

// A cluster with the default timing under a normal closed-loop load
// (submits, claims and acks on every member) keeps its leader and term on
// this loaded machine. A change is excused only when this process or a
// member process measured a stall of at least half a lease within one
// lease-long stretch, and is logged either way.
func TestNoChurnWithDefaults(t *testing.T) {
	tm := defaultTiming()
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) { mc.Timing = tm })
	l := p.WaitLeader(wait)
	p.WaitConverged(wait)
	stalltest.Watch()
	status := func(i int) clustertest.Reply {
		rep, err := p.CallT(i, "/status", clustertest.Request{}, 5*time.Second)
		if err != nil {
			rep.Role = "no_reply"
		}
		return rep
	}
	term := status(l).Term
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ops := map[string]int{}
	count := func(op, outcome string) {
		mu.Lock()
		ops[op+" "+outcome]++
		mu.Unlock()
	}
	for c := 0; c < 12; c++ {
		m := c % 3
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := p.CallT(m, "/submit", clustertest.Request{Queue: "churn", Payload: fmt.Sprintf("c%d-%d", c, n)}, 10*time.Second)
				if err != nil {
					rep.Outcome = "no_reply"
				}
				count("submit", rep.Outcome)
			}
		}()
	}
	for c := 0; c < 6; c++ {
		m := c % 3
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := p.CallT(m, "/claim", clustertest.Request{Queue: "churn", Worker: fmt.Sprint("w", c), TTL: 10 * time.Second, Wait: 200 * time.Millisecond}, 10*time.Second)
				if err != nil || len(rep.Jobs) == 0 {
					continue
				}
				j := rep.Jobs[0]
				rep, err = p.CallT(m, "/ack", clustertest.Request{ID: j.ID, Token: j.Token, Result: "ok"}, 10*time.Second)
				if err != nil {
					rep.Outcome = "no_reply"
				}
				count("ack", rep.Outcome)
			}
		}()
	}
	var changes []string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < *churnFlag {
		<-tick.C
		for i := 0; i < 3; i++ {
			s := status(i)
			if s.Term != term || (i == l && s.Role != "Leader") {
				changes = append(changes, fmt.Sprintf("p%d at %v: role %s, term %d (was %d)", i, time.Since(start).Round(time.Millisecond), s.Role, s.Term, term))
				term = max(term, s.Term)
				if nl := p.Leader(); nl >= 0 {
					l = nl
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	end := time.Now()
	lease := tm.LeaderLease
	// The worst stall within one lease-long stretch, of this process and
	// of each member process (its own watcher, over /status).
	worst := stalltest.Worst(start.Add(-2*lease), end, lease)
	for i := 0; i < 3; i++ {
		rep, err := p.CallT(i, "/status", clustertest.Request{TTL: lease, Wait: time.Since(start) + 2*lease}, 5*time.Second)
		if err == nil && rep.WorstStall > worst {
			worst = rep.WorstStall
		}
	}
	t.Logf("%v of load with heartbeat %v, election %v, lease %v: %d leadership changes; ops %v; worst stall %v within a %v stretch; %v",
		end.Sub(start).Round(time.Millisecond), tm.Heartbeat, tm.Election, lease, len(changes), ops, worst.Round(time.Millisecond), lease,
		stalltest.Between(start, end))
	for _, c := range changes {
		t.Logf("leadership change: %s", c)
	}
	if ops["submit ok"] == 0 || ops["ack ok"] == 0 {
		t.Errorf("no load ran: %v", ops)
	}
	if len(changes) > 0 && worst < lease/2 {
		t.Errorf("%d leadership changes under normal load, and no measured stall explains them", len(changes))
	}
	p.WaitConverged(wait)
	p.RequireApplied(true)
}
