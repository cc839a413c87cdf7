package chaos

import (
	"fmt"
	"time"

	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// livenessBound is how long a connected quorum may be seen without a
// leader: the followers notice the leader is gone within two heartbeat
// timeouts (hashicorp/raft randomizes it in [HB, 2HB)), then an election
// completes within two election timeouts, and one split vote (candidates
// timing out together, seen with five members) may take two more; plus
// one poll period of observation. The members run with HB = ET, so
// 6 ET + poll. Widened by the measured stall, and by failedLeaderLeads
// for a stretch that began with the leader's disk failing.
func (r *runner) livenessBound() time.Duration {
	return 6*r.o.ElectionTimeout + pollEvery
}

// effective is the schedule as it ran: the actions started, made
// concrete (leader references resolved), in start order; the skipped ones
// left out.
func (r *runner) effective() Schedule {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.s
	e.Actions = nil
	for _, a := range r.resolved {
		e.Actions = append(e.Actions, a)
	}
	sortActions(e.Actions)
	return e
}

// memberImpaired reports whether the schedule has a member fault on m at
// offset t (a kill, a power loss, a pause, a failing disk, a bit flip).
func (s Schedule) memberImpaired(m int, t time.Duration) bool {
	return s.faultOn(m, t, Kill, PowerLoss, Pause, Fsync, DiskFull, BitFlip)
}

// faultOn reports whether the schedule has a fault of one of kinds on
// member m at offset t.
func (s Schedule) faultOn(m int, t time.Duration, kinds ...Kind) bool {
	for _, a := range s.Actions {
		if t < a.At || t >= a.End() || len(a.Members) == 0 || a.Members[0] != m {
			continue
		}
		for _, k := range kinds {
			if a.Kind == k {
				return true
			}
		}
	}
	return false
}

// failedLeaderLeads is how much longer a stretch may last when it began
// with the leader's disk failing: a leader whose log failed leads on until
// its replicators have the entries it appended or an election timeout
// passed (raft.Node's step-down), and its followers, hearing it, hold
// their votes meanwhile; one election timeout.
func (r *runner) failedLeaderLeads(round []Sample, t time.Duration, eff Schedule) time.Duration {
	for _, s := range round {
		if s.Role == "Leader" && eff.faultOn(s.Member, t, Fsync, DiskFull) {
			return r.o.ElectionTimeout
		}
	}
	return 0
}

// linkHealthy reports whether the schedule leaves the link x–y whole, both
// ways, at offset t: no partition between them, no cut, no flap, no lossy
// network.
func (s Schedule) linkHealthy(x, y int, t time.Duration) bool {
	for _, a := range s.Actions {
		if t < a.At || t >= a.End() {
			continue
		}
		switch a.Kind {
		case Net:
			return false
		case Partition:
			if a.has(x) != a.has(y) {
				return false
			}
		case Bridge, OneWay, Flap:
			if a.has(x) && a.has(y) {
				return false
			}
		case Mute:
			if a.has(x) || a.has(y) {
				return false
			}
		}
	}
	return true
}

// liveness: whenever a quorum of the configuration's voters is up
// (answering), free of member faults and pairwise connected, one of them
// leads within the bound, widened by the stall measured over the
// leaderless stretch. While a membership change is under way the voter
// set is not known and nothing is judged.
func (r *runner) liveness() Verdict {
	n := r.s.Slots()
	samples := r.obs.all()
	bound := r.livenessBound()
	eff := r.effective()
	var worst time.Duration
	first := time.Duration(-1) // the first leaderless round of a connected quorum's current stretch
	var extra time.Duration    // the current stretch's allowance past bound (failedLeaderLeads)
	var prev time.Duration     // the previous round
	_, loss, lied := r.firstLie()
	for k := 0; k+n <= len(samples); k += n {
		round := samples[k : k+n]
		t := round[0].At
		if lied && t >= loss {
			break // after a lie's power loss: not judged (docs/chaos.md, "A lying disk")
		}
		voters, known := r.members.configAt(t)
		healthy := make([]bool, n)
		for _, s := range round {
			healthy[s.Member] = s.OK && !eff.memberImpaired(s.Member, t)
		}
		quorum, led := false, false
		if known {
			quorum, led = eff.connectedQuorum(voters, t, func(x int) bool { return healthy[x] }, func(x int) bool { return round[x].Role == "Leader" })
		}
		// A moment since the previous round without a connected quorum in
		// the schedule (a fault the sparse rounds did not see), or with a
		// change under way, ends the stretch there.
		for tau := t; tau > prev; tau -= 10 * time.Millisecond {
			vs, ok := r.members.configAt(tau)
			if q, _ := eff.connectedQuorum(vs, tau, nil, nil); !ok || !q {
				first = -1
				break
			}
		}
		prev = t
		if !quorum || led {
			first = -1
			continue
		}
		if first < 0 {
			first = t
			// The leader that made this stretch may show in this round
			// or the one before.
			extra = r.failedLeaderLeads(round, t, eff)
			if k >= n && extra == 0 {
				extra = r.failedLeaderLeads(samples[k-n:k], t, eff)
			}
		}
		// The stretch is measured between leaderless observations: a
		// lower bound of the time without a leader, so a round that took
		// long (a paused member's call times out) cannot make one up.
		gap := t - first
		worst = max(worst, gap)
		stall := stalltest.Between(r.start.Add(first), r.start.Add(t))
		if gap > bound+extra+stall.Total {
			return Verdict{Checker: "liveness", At: first,
				Detail: fmt.Sprintf("a connected quorum of %v without a leader for at least %s from %s (bound %s, %s)", voters, gap.Round(time.Millisecond), first.Round(time.Millisecond), bound+extra, stall)}
		}
	}
	detail := fmt.Sprintf("longest leaderless stretch of a connected quorum %s (bound %s)", worst.Round(time.Millisecond), bound)
	if lied {
		detail += fmt.Sprintf("; judged until the first lie's power loss at %s", loss.Round(time.Millisecond))
	}
	return Verdict{Checker: "liveness", OK: true, Detail: detail}
}

// connectedQuorum reports whether, at offset t, a majority of voters is
// free of member faults in the schedule, healthy (nil: no further
// condition) and pairwise connected, and whether one such majority holds
// a member that leads (nil: none does).
func (s Schedule) connectedQuorum(voters []int, t time.Duration, healthy, leads func(int) bool) (quorum, led bool) {
	n := len(voters)
	for set := 1; set < 1<<n; set++ {
		size, ok, leader := 0, true, false
		for xi := 0; xi < n && ok; xi++ {
			if set&(1<<xi) == 0 {
				continue
			}
			x := voters[xi]
			size++
			ok = !s.memberImpaired(x, t) && (healthy == nil || healthy(x))
			leader = leader || (leads != nil && leads(x))
			for yi := xi + 1; yi < n && ok; yi++ {
				if set&(1<<yi) != 0 {
					ok = s.linkHealthy(x, voters[yi], t)
				}
			}
		}
		if ok && size > n/2 {
			quorum = true
			led = led || leader
		}
	}
	return quorum, led
}

// quorumConnected reports whether the schedule leaves, at offset t, a
// majority of its initial members free of member faults and pairwise
// connected.
func (s Schedule) quorumConnected(t time.Duration) bool {
	var voters []int
	for i := 0; i < s.Members; i++ {
		voters = append(voters, i)
	}
	q, _ := s.connectedQuorum(voters, t, nil, nil)
	return q
}
