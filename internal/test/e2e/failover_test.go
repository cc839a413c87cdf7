package e2e_test

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// The leader process is SIGKILLed (and restarted) during a stream of
// submits from several clients spread over the members. Afterwards every
// submit that returned success exists exactly once, none that returned
// "not submitted" exists, and those whose outcome was unknown exist at most
// once. Jobs are counted by a payload tag unique to each submit call,
// independent of the job ID the controller assigns.
func TestFailoverSubmitsExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewSource(seed(t)))
	p := clustertest.StartCtlProcs(t, 3, nil)
	p.WaitLeader(wait)
	rounds := 2
	if *longFlag {
		rounds = 6
	}
	var mu sync.Mutex
	var results []submitOutcome
	var alive [3]bool
	for i := range alive {
		alive[i] = true
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 8
	for c := 0; c < clients; c++ {
		crng := rand.New(rand.NewSource(rng.Int63()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				m := crng.Intn(3)
				for !alive[m] {
					m = (m + 1) % 3
				}
				mu.Unlock()
				tag := fmt.Sprintf("c%d-%d", c, n)
				rep, err := p.CallT(m, "/submit", clustertest.Request{Queue: "f", Payload: tag}, 4*time.Second)
				out := rep.Outcome
				if err != nil {
					out = "no_reply"
				}
				mu.Lock()
				results = append(results, submitOutcome{tag, out})
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(results) }
	for r := 0; r < rounds; r++ {
		before := count()
		clustertest.WaitFor(t, wait, "submits before the kill", func() bool { return count() >= before+60 })
		l := p.WaitLeader(wait)
		mu.Lock()
		alive[l] = false
		mu.Unlock()
		p.Kill(l)
		nl := p.WaitLeader(wait)
		t.Logf("round %d: killed leader p%d; new leader p%d after %d submits", r, l, nl, count())
		before = count()
		clustertest.WaitFor(t, wait, "submits under the new leader", func() bool { return count() >= before+20 })
		p.Start(l)
		mu.Lock()
		alive[l] = true
		mu.Unlock()
		p.RequireApplied(false)
	}
	close(stop)
	wg.Wait()
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	p.RequireApplied(true)

	seen := map[string]int{}
	for i := 0; i < 3; i++ {
		rep, err := p.CallT(i, "/list", clustertest.Request{Queue: "f", Local: i != 0}, 10*time.Second)
		if err != nil || rep.Outcome != clustertest.OutcomeOK {
			t.Fatalf("list on p%d: %v %+v", i, err, rep.Error)
		}
		perMember := map[string]int{}
		for _, j := range rep.Jobs {
			perMember[j.Payload]++
		}
		if i == 0 {
			seen = perMember
		} else if fmt.Sprint(perMember) != fmt.Sprint(seen) {
			t.Fatalf("p%d holds different jobs than p0 after convergence", i)
		}
	}
	tally := checkExactlyOnce(t, results, seen)
	if tally[clustertest.OutcomeOK] == 0 {
		t.Fatal("no submit succeeded")
	}
}

// submitOutcome is one submit's tag (its payload) and the outcome its
// client saw.
type submitOutcome struct{ tag, outcome string }

// checkExactlyOnce checks submit outcomes against the jobs a converged
// member holds (seen: payload → count): an acknowledged submit exists
// exactly once, one reported not submitted never, one of unknown outcome
// at most once, and no job exists that no submit made. It returns the
// outcomes' tally.
func checkExactlyOnce(t *testing.T, results []submitOutcome, seen map[string]int) map[string]int {
	t.Helper()
	tally := map[string]int{}
	for _, r := range results {
		tally[r.outcome]++
		n := seen[r.tag]
		switch r.outcome {
		case clustertest.OutcomeOK:
			if n != 1 {
				t.Errorf("acked submit %s exists %d times", r.tag, n)
			}
		case clustertest.OutcomeNotSubmitted:
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
	return tally
}
