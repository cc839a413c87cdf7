package raft_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// loadProcs proposes unique keys from workers goroutines, round-robin over
// the running members, until stop is closed; every outcome goes to the
// ledger.
func loadProcs(members []*clustertest.NodeProc, workers int, l *ledger, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				m := members[(g+k)%len(members)]
				if !m.Running() {
					continue
				}
				key := fmt.Sprintf("p%d-%d", g, k)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := m.Propose(ctx, []byte(key+"=v"))
				cancel()
				l.record(key, err)
			}
		}()
	}
	return &wg
}

// The leader is a child process, SIGKILLed (no graceful shutdown) under a
// stream of proposals on every member; twice in a row (the second victim is
// the first's successor). Each time a new leader in a strictly higher term
// takes over; the killed member restarts from its data dir; afterwards
// every acknowledged proposal is applied exactly once on every member, no
// rejected one anywhere, and the digests are equal at equal applied index.
func TestCrashLeaderProcess(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	h := clustertest.NewNodeProcs(t)
	ms := h.StartCluster(3, nil)
	leader, st := h.LeaderProc(wait, 0)
	l := newLedger()
	stop := make(chan struct{})
	wg := loadProcs(ms, 6, l, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	for round := 0; round < 2; round++ {
		base := l.successes()
		clustertest.WaitFor(t, wait, "20 acknowledged proposals", func() bool { return l.successes() >= base+20 })
		delay := time.Duration(rng.Intn(200)) * time.Millisecond
		time.Sleep(delay) // a random kill point: the fault, not a wait for state
		leader.Kill()
		t.Logf("round %d: killed leader %s (term %d) after %v; %d acknowledged so far", round, leader.Cfg.ID, st.Term, delay, l.successes())
		nl, nst := h.LeaderProc(wait, st.Term)
		if nl == leader {
			t.Fatalf("killed member %s reported leader", leader.Cfg.ID)
		}
		t.Logf("round %d: new leader %s in term %d (was %d)", round, nl.Cfg.ID, nst.Term, st.Term)
		base = l.successes()
		clustertest.WaitFor(t, wait, "20 acknowledged proposals under the new leader", func() bool { return l.successes() >= base+20 })
		leader.Restart()
		base = l.successes()
		clustertest.WaitFor(t, wait, "10 more acknowledged proposals", func() bool { return l.successes() >= base+10 })
		leader, st = nl, nst
	}
	close(stop)
	wg.Wait()
	conv := h.WaitConverged(wait)
	h.CheckAlive()
	dumps := dumpProcs(t, ms)
	c := l.check(t, dumps)
	checkAppliedProcs(t, h)
	t.Logf("converged at applied index %d, %d keys; outcomes: %v", conv.AppliedIndex, len(dumps["m0"]), c)
}
