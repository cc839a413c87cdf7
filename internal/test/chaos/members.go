package chaos

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// members is the run's configuration as the harness changed it: which
// member processes are voters, which were removed, and a timeline of the
// voter set with the stretches where a change was under way (its outcome
// unknown), for the liveness checker.
type members struct {
	mu      sync.Mutex
	voter   []bool // in the configuration (a spare once its add completed)
	removed []bool // removed from the configuration and stopped for good
	pending int    // changes under way
	changes []configChange
	stop    chan struct{} // closed: changes under way give up
	wg      sync.WaitGroup
}

// configChange is the voter set from At on; Pending: a change was under
// way, so the set was not known.
type configChange struct {
	At      time.Duration
	Voters  []int
	Pending bool
}

func newMembers(s Schedule) *members {
	m := &members{voter: make([]bool, s.Slots()), removed: make([]bool, s.Slots()), stop: make(chan struct{})}
	for i := 0; i < s.Members; i++ {
		m.voter[i] = true
	}
	m.changes = []configChange{{Voters: m.votersLocked()}}
	return m
}

func (m *members) votersLocked() []int {
	var out []int
	for i, v := range m.voter {
		if v {
			out = append(out, i)
		}
	}
	return out
}

// mark records a change: begin (a change starts), or its end with the
// member's new place (voter or removed).
func (m *members) mark(at time.Duration, f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f != nil {
		f()
	}
	m.changes = append(m.changes, configChange{At: at, Voters: m.votersLocked(), Pending: m.pending > 0})
}

// configAt returns the voter set at offset t, and false when a change was
// under way then.
func (m *members) configAt(t time.Duration) ([]int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.changes[0]
	for _, x := range m.changes {
		if x.At > t {
			break
		}
		c = x
	}
	return c.Voters, !c.Pending
}

// inConfig reports whether slot i is a voter now.
func (m *members) inConfig(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.voter[i]
}

// isRemoved reports whether slot i was removed.
func (m *members) isRemoved(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removed[i]
}

// busy returns how many changes are under way.
func (m *members) busy() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending
}

// change runs a membership action (resolved) in the background: Remove
// removes Members[0], Add adds Members[0], Replace removes Members[0] and
// then adds Members[1]. Each call is retried until it completes or the
// run gives up (members.stop).
func (r *runner) change(a Action) {
	m := r.members
	m.mu.Lock()
	m.pending++
	m.mu.Unlock()
	m.mark(r.since(), nil)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ok := true
		switch a.Kind {
		case Remove:
			ok = r.removeMember(a.Members[0])
		case Add:
			ok = r.addMember(a.Members[0])
		case Replace:
			ok = r.removeMember(a.Members[0]) && r.addMember(a.Members[1])
		}
		m.mark(r.since(), func() { m.pending-- })
		if !ok {
			r.note(-1, "%s: gave up (the run ended first)", a)
		}
	}()
}

// removeMember removes slot i from the configuration, then stops its
// process for good (its data dir and applied history stay: the applied
// checker still reads it).
func (r *runner) removeMember(i int) bool {
	id := r.p.Cfgs[i].ID
	if !r.retry(fmt.Sprintf("remove %s", id), "/remove", clustertest.Request{ID: id}, i) {
		return false
	}
	r.members.mark(r.since(), func() { r.members.voter[i], r.members.removed[i] = false, true })
	r.setDown(i, true)
	r.p.Kill(i)
	r.note(i, "removed from the configuration; process stopped")
	return true
}

// addMember adds spare slot i (its process runs, empty) and waits until
// the catch-up policy promoted it.
func (r *runner) addMember(i int) bool {
	c := r.p.Cfgs[i]
	if !r.retry(fmt.Sprintf("add %s", c.ID), "/add", clustertest.Request{ID: c.ID, Addr: c.RaftAddr}, -1) {
		return false
	}
	r.members.mark(r.since(), func() { r.members.voter[i] = true })
	r.note(i, "added: a voter")
	return true
}

// retry sends req to path on a running voter (not skip) until one answers
// ok; false when the run gave up first.
func (r *runner) retry(what, path string, req clustertest.Request, skip int) bool {
	const callFor = 10 * time.Second
	req.Timeout = callFor
	for k := 0; ; k++ {
		select {
		case <-r.members.stop:
			return false
		default:
		}
		to := r.memberFor(k, skip)
		if to >= 0 {
			rep, err := r.p.CallT(to, path, req, callFor+time.Second)
			if err == nil && rep.Outcome == clustertest.OutcomeOK {
				r.note(to, "%s: ok", what)
				return true
			}
			r.note(to, "%s: %v %s %s", what, err, rep.Outcome, rep.Error)
		}
		select {
		case <-r.members.stop:
			return false
		case <-time.After(100 * time.Millisecond): // the next try of a refused change
		}
	}
}

// memberFor picks the k-th try's target: the leader when one is known,
// else a running, unpaused voter other than skip.
func (r *runner) memberFor(k, skip int) int {
	if l := r.obs.leader(); l >= 0 && l != skip && r.members.inConfig(l) && k%2 == 0 {
		return l
	}
	var cands []int
	for i := 0; i < r.s.Slots(); i++ {
		if i != skip && r.members.inConfig(i) && r.running(i) && !r.isPaused(i) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return -1
	}
	return cands[k%len(cands)]
}

// waitMembership waits, in the final phase, for the changes under way to
// complete, polling until the stall-widened bound w allows no more.
func (r *runner) waitMembership(exceeded func() bool) bool {
	for r.members.busy() > 0 {
		if exceeded() {
			return false
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	return true
}

// stopMembership makes the changes still under way give up and waits
// for them.
func (r *runner) stopMembership() {
	close(r.members.stop)
	r.members.wg.Wait()
}

// checkVoters compares a member's reported voters with the harness's.
func (r *runner) checkVoters(rep clustertest.Reply) *Verdict {
	var want []string
	for _, i := range r.members.votersSnapshot() {
		want = append(want, r.p.Cfgs[i].ID)
	}
	slices.Sort(want)
	if !slices.Equal(want, rep.Voters) {
		return &Verdict{Checker: "membership", At: r.since(), Detail: fmt.Sprintf("the leader's voters %v, the harness added and removed to %v", rep.Voters, want)}
	}
	return nil
}

func (m *members) votersSnapshot() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.votersLocked()
}
