package e2e_test

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// frozenGoal is how soon after the leader's SIGSTOP every live member
// should accept a fresh submit, with a 1 s heartbeat and election timeout
// (#14's goal): a new leader is elected in about 1-3 s, and what a member
// had forwarded to the frozen leader ends as soon as it learns of the new
// one and is retried there by ID. (Without that, forwarded submits waited
// for the 10 s propose timeout.)
const frozenGoal = 4 * time.Second

// frozenBound is what raft's timers guarantee, and what the test asserts:
// an election can take up to 3H + 2E without any stall when the votes split
// (both followers candidates at once), plus half a heartbeat for the new
// leader's first commit and the retried forward. Before the seam lifted a
// silent leader's stickiness (docs/upstream.md U13) that worst case also
// came when the follower with the longer log timed out first: about 2 % of
// freezes. A probe past frozenGoal but within this is logged, not failed.
const frozenBound = 3*frozenH + 2*frozenE + frozenH/2

// The frozen tests' timing: heartbeat and election timeouts of 1 s.
const frozenH, frozenE = time.Second, time.Second

var frozenTiming = clustertest.Timing{Heartbeat: frozenH, Election: frozenE, LeaderLease: frozenH / 2, ProposeTimeout: 10 * time.Second}

// The leader process is SIGSTOPped while clients submit on every member.
// Each live member accepts a fresh submit (sent after the pause) within
// frozenBound, widened by the largest stall measured meanwhile by this
// process or a live member's (frozenStall). After SIGCONT
// every acknowledged submit exists exactly once, none reported not
// submitted exists, and none exists twice.
func TestFrozenLeaderSubmitsResume(t *testing.T) {
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) {
		mc.Timing = frozenTiming
	})
	l := p.WaitLeader(wait)
	stalltest.Watch()

	var mu sync.Mutex
	var results []submitOutcome
	submit := func(m int, tag string, d time.Duration) string {
		rep, err := p.CallT(m, "/submit", clustertest.Request{Queue: "fz", Payload: tag}, d)
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
	clustertest.WaitFor(t, wait, "submits before the pause", func() bool { return count() >= 100 })

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
			return submit(m, fmt.Sprintf("probe%d-%d", m, n), 15*time.Second) == clustertest.OutcomeOK
		}})
	}
	runFrozenProbes(t, p, paused, l, probes)
	// The old leader stays frozen (at least 8 s) under the new one's load.
	before := count()
	clustertest.WaitFor(t, wait, "submits under the new leader", func() bool {
		return count() >= before+100 && paused.Elapsed() >= 8*time.Second
	})
	p.Resume(l)
	resumed = true
	close(stop)
	wg.Wait()
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	p.RequireApplied(true)

	rep, err := p.CallT(l, "/list", clustertest.Request{Queue: "fz"}, 10*time.Second)
	if err != nil || rep.Outcome != clustertest.OutcomeOK {
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
	what string
	m    int
	try  func(n int) bool
	took time.Duration // from the pause to the probe's success (-1: none within wait)
}

// runFrozenProbes runs the probes concurrently and asserts each succeeded
// within frozenBound of the pause, widened by frozenStall over that time.
// Meanwhile it watches the election on each live member (watchElection),
// so a failure says whether the election or what followed it was late.
func runFrozenProbes(t *testing.T, p *clustertest.CtlProcs, paused stalltest.Window, l int, probes []*frozenProbe) {
	t.Helper()
	stop := make(chan struct{})
	election := watchElection(p, l, paused.Began(), stop)
	var running sync.WaitGroup
	for _, pr := range probes {
		running.Add(1)
		go func() {
			defer running.Done()
			for n := 0; paused.Elapsed() < wait; n++ {
				if pr.try(n) {
					pr.took = paused.Elapsed()
					return
				}
			}
			pr.took = -1
		}()
	}
	running.Wait()
	close(stop)
	seen := <-election
	for _, pr := range probes {
		end := time.Now()
		if pr.took >= 0 {
			end = paused.Began().Add(pr.took)
		}
		widen, stalls := frozenStall(t, p, l, paused.Began(), end)
		t.Logf("p%d answered %s %v after the leader p%d froze; election: %s; stalls until then: %s",
			pr.m, pr.what, pr.took.Round(time.Millisecond), l, seen, stalls)
		if pr.took > frozenGoal+widen && pr.took <= frozenBound+widen {
			t.Logf("p%d: %s answered after %v, past the goal %v + %v but within raft's worst case %v (election: %s)",
				pr.m, pr.what, pr.took.Round(time.Millisecond), frozenGoal, widen.Round(time.Millisecond), frozenBound, seen)
		}
		if pr.took < 0 || pr.took > frozenBound+widen {
			t.Errorf("p%d: first %s answered after %v; bound %v + %v, the largest stall of the processes it needed (%s)",
				pr.m, pr.what, pr.took.Round(time.Millisecond), frozenBound, widen.Round(time.Millisecond), stalls)
		}
	}
}

// frozenStall is the allowance of a probe over [from, to): the largest
// scheduling stall measured in that window by the test process or by a
// live member process (each measures its own: stalltest in this process,
// clustertest.CtlProcs.Stall for a member), and every measurement for the
// message. A probe's answer (a fresh submit, a linearizable read) needs
// every one of them to run: this process sends it and reads the answer,
// and with the leader frozen the two live members are the only quorum, so
// both take part in the election and in the commit or the read's quorum
// round. The largest, not the sum: on a saturated machine the same busy
// loops stall all of them at the same moments, so their stalls overlap,
// and a sum would count one slow stretch two or three times. The frozen
// leader's stall (it is stopped) is no allowance.
func frozenStall(t *testing.T, p *clustertest.CtlProcs, l int, from, to time.Time) (time.Duration, string) {
	t.Helper()
	test := stalltest.Between(from, to)
	widen := test.Total
	stalls := []string{fmt.Sprintf("test process %v", test)}
	for m := range p.Cfgs {
		if m == l {
			continue
		}
		s, err := p.Stall(m, from, to)
		if err != nil {
			t.Errorf("p%d: its stall over the probe: %v", m, err)
			continue
		}
		widen = max(widen, s.Total)
		stalls = append(stalls, fmt.Sprintf("p%d %v", m, s))
	}
	return widen, strings.Join(stalls, ", ")
}

// The leader process is SIGSTOPped while nothing else runs. Each live
// member answers a linearizable read sent after the pause (its read index
// is asked of the leader it knows: the frozen one until it learns of the
// next) within frozenBound, widened as the submits' bound is.
func TestFrozenLeaderReadsResume(t *testing.T) {
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) {
		mc.Timing = frozenTiming
	})
	l := p.WaitLeader(wait)
	p.WaitConverged(wait)
	// A read on every member first: each follower's connection to the
	// leader is open (pooled) when the leader freezes.
	for i := 0; i < 3; i++ {
		if rep, err := p.CallT(i, "/get", clustertest.Request{ID: "none"}, wait); err != nil || rep.Outcome != clustertest.OutcomeOK {
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
			rep, err := p.CallT(m, "/get", clustertest.Request{ID: "none"}, 15*time.Second)
			return err == nil && rep.Outcome == clustertest.OutcomeOK
		}})
	}
	runFrozenProbes(t, p, paused, l, probes)
}

// watchElection polls every member but the frozen l (/status, every 50
// ms) until stop closes, then sends when each was first seen a candidate
// and its last index then, and when it first reported a leader other than
// l, counted from since: "p1 candidate at 1.62s (last index 109), knew p2
// in term 3 at 3.39s". With the pre-vote, a member whose log is longer refuses the
// other's campaign, and the other refuses its campaign while it still
// knows the frozen leader: an answer past the bound with little stall
// shows here as an election that ended late.
func watchElection(p *clustertest.CtlProcs, l int, since time.Time, stop <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		candidate, leader := map[int]string{}, map[int]string{}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				var seen []string
				for m := range p.Cfgs {
					if m != l {
						seen = append(seen, fmt.Sprintf("p%d candidate %s, knew %s", m, cmp.Or(candidate[m], "not seen"), cmp.Or(leader[m], "no new leader")))
					}
				}
				out <- strings.Join(seen, "; ")
				return
			case <-tick.C:
			}
			for m := range p.Cfgs {
				if m == l || leader[m] != "" {
					continue
				}
				rep, err := p.CallT(m, "/status", clustertest.Request{}, time.Second)
				at := time.Since(since).Round(time.Millisecond)
				switch {
				case err != nil:
				case rep.Leader != "" && rep.Leader != p.Cfgs[l].ID:
					leader[m] = fmt.Sprintf("%s in term %d at %v", rep.Leader, rep.Term, at)
				case rep.Role == "Candidate" && candidate[m] == "":
					candidate[m] = fmt.Sprintf("at %v (last index %d)", at, rep.Last)
				}
			}
		}
	}()
	return out
}
