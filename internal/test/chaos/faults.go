package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// faultState is the network and disk faults in force, pushed to every
// member process (clustertest.FaultSpec over POST /faults) by one pusher per
// member: after every change, and after a restart.
type faultState struct {
	r *runner

	mu     sync.Mutex
	active map[int]Action // action number → action, network and disk kinds
	gen    uint64         // bumped on every change
	pushed []uint64       // per member: the generation it holds (0: none)
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newFaultState(r *runner) *faultState {
	f := &faultState{r: r, active: map[int]Action{}, gen: 1, pushed: make([]uint64, r.s.Slots()), stop: make(chan struct{})}
	for i := 0; i < r.s.Slots(); i++ {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.pusher(i) }()
	}
	return f
}

func (f *faultState) close() {
	close(f.stop)
	f.wg.Wait()
}

// set starts (on) or ends action k.
func (f *faultState) set(k int, a Action, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.active[k] = a
	} else {
		delete(f.active, k)
	}
	f.gen++
}

// restarted marks member i as holding no faults (a new process).
func (f *faultState) restarted(i int) {
	f.mu.Lock()
	f.pushed[i] = 0
	f.mu.Unlock()
}

// spec is member i's FaultSpec now.
func (f *faultState) spec(i int) (clustertest.FaultSpec, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s clustertest.FaultSpec
	addr := func(m int) string { return f.r.p.Cfgs[m].RaftAddr }
	cut := func(a, b int) { s.Cut = append(s.Cut, [2]string{addr(a), addr(b)}) }
	for k, a := range f.active {
		switch a.Kind {
		case Partition:
			in := map[int]bool{}
			for _, m := range a.Members {
				in[m] = true
			}
			for x := 0; x < f.r.s.Slots(); x++ {
				for y := 0; y < f.r.s.Slots(); y++ {
					if in[x] != in[y] {
						cut(x, y)
					}
				}
			}
		case Bridge:
			cut(a.Members[0], a.Members[1])
			cut(a.Members[1], a.Members[0])
		case OneWay:
			cut(a.Members[0], a.Members[1])
		case Mute:
			for x := 0; x < f.r.s.Slots(); x++ {
				if x != a.Members[0] {
					cut(a.Members[0], x)
				}
			}
		case Flap:
			s.Flap = append(s.Flap, clustertest.FlapSpec{A: addr(a.Members[0]), B: addr(a.Members[1]), Period: a.Period})
		case Net:
			s.Drop, s.Dup, s.Delay = max(s.Drop, a.Drop), max(s.Dup, a.Dup), max(s.Delay, a.Delay)
		case Fsync:
			s.FailSyncs = s.FailSyncs || a.Members[0] == i
		case DiskFull:
			s.DiskFull = s.DiskFull || a.Members[0] == i
		case Stall:
			if a.Members[0] == i && k+1 > s.StallID {
				s.Stall, s.StallID = a.Delay, k+1
			}
		}
	}
	return s, f.gen
}

// pusher keeps member i's process holding the current spec.
func (f *faultState) pusher(i int) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		s, gen := f.spec(i)
		f.mu.Lock()
		have := f.pushed[i]
		f.mu.Unlock()
		if have == gen || !f.r.running(i) || f.r.isPaused(i) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		rep, err := f.r.p.Post(ctx, i, "/faults", s)
		cancel()
		if err == nil && rep.Outcome == clustertest.OutcomeOK {
			f.mu.Lock()
			if f.pushed[i] == have {
				f.pushed[i] = gen
			}
			f.mu.Unlock()
		}
	}
}

// inForce reports whether action k's network or disk fault is in force.
func (f *faultState) inForce(k int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.active[k]
	return ok
}
