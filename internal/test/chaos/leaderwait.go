package chaos

import (
	"fmt"
	"time"

	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// The members' Config.LeaderWait, and the reachability round that ends a
// wait for a leader (raft's probeTimeout: each voter of the configuration
// is asked for its status, for at most a second).
const (
	memberLeaderWait = time.Second
	probeTimeout     = time.Second
)

// leaderWaitBound is how long an operation sent to a member cut off from
// every quorum may take: a forwarded proposal lapses at LeaderWait once
// the member knows no leader, and the controller's retry of that unknown
// attempt waits at most another LeaderWait, each ended by a reachability
// round; a stale leader steps down, and a follower stops knowing its
// leader, within two election timeouts (heartbeat = election timeout
// here); one second of slack for the HTTP round trip and the member's own
// scheduling. Widened by the measured stall.
func (r *runner) leaderWaitBound() time.Duration {
	return 2*(memberLeaderWait+probeTimeout) + 2*r.o.ElectionTimeout + time.Second
}

// callTimeout is the workload's timeout of one call (and the context it
// asks the member to use): long enough that a call the member must end
// within leaderWaitBound is not cut short by the client, which would hide
// a hang.
func (r *runner) callTimeout() time.Duration { return r.leaderWaitBound() + 2*time.Second }

// leaderWait: every operation sent to a member that, from its call until
// leaderWaitBound later, stays up while the schedule leaves it no way to
// any quorum (no majority of the voters up and pairwise connected with it
// or with a member it is linked to), is answered within leaderWaitBound,
// widened by the stall this process measured meanwhile, never left
// hanging until the client gives up. Such a member cannot reach a leader,
// so its answer is a bounded refusal (not submitted, not applied, no
// leader) or an unknown outcome. Judged pessimistically for the schedule:
// a link is cut only by a partition, a bridge, a one-way cut or a mute; a
// member is down only while killed, paused or powered off (a restarted
// member counts as up at once), so a window is judged only when no
// quorum could possibly be reached. Operations answered "no leader" are
// counted, not judged (one that began under a leader may have waited for
// it first).
func (r *runner) leaderWait(ops []Op) Verdict {
	eff := r.effective()
	bound := r.leaderWaitBound()
	cut := r.cutOffTimeline(eff)
	var judged, noLeader int
	var worst, worstNoLeader time.Duration
	for _, op := range ops {
		took := op.Return - op.Call
		if op.NoLeader {
			noLeader++
			worstNoLeader = max(worstNoLeader, took)
		}
		if op.Kind == "watch" || op.Kind == "batch-job" || !cut.throughout(op.Member, op.Call, op.Call+bound) {
			continue
		}
		judged++
		worst = max(worst, took)
		stall := stalltest.Between(r.start.Add(op.Call), r.start.Add(op.Return))
		if !op.Replied || took > bound+stall.Total {
			what := fmt.Sprintf("answered %s after %s", op.Outcome, took.Round(time.Millisecond))
			if !op.Replied {
				what = fmt.Sprintf("had no answer after %s", took.Round(time.Millisecond))
			}
			return Verdict{Checker: "leader-wait", At: op.Call, Members: []int{op.Member},
				Detail: fmt.Sprintf("%s %s on m%d, cut off from every quorum, %s (bound %s, %s)", op.Kind, op.Job, op.Member, what, bound, stall)}
		}
	}
	return Verdict{Checker: "leader-wait", OK: true, Judged: judged, Detail: fmt.Sprintf("%d operations on members cut off from every quorum, the longest %s (bound %s); %d answered no leader, the longest %s",
		judged, worst.Round(time.Millisecond), bound, noLeader, worstNoLeader.Round(time.Millisecond))}
}

// cutStep is the resolution of the cut-off timeline.
const cutStep = 10 * time.Millisecond

// cutOff is, per member, for each cutStep of the fault phase, whether the
// member was up and had no way to any quorum then.
type cutOff struct {
	steps [][]bool // [member][step]
}

// throughout reports whether member m was cut off at every step of
// [from, to]; a moment past the fault phase never is.
func (c cutOff) throughout(m int, from, to time.Duration) bool {
	if m < 0 || m >= len(c.steps) || from < 0 {
		return false
	}
	s := c.steps[m]
	for k := int(from / cutStep); k <= int(to/cutStep); k++ {
		if k >= len(s) || !s[k] {
			return false
		}
	}
	return true
}

// cutOffTimeline computes the cut-off timeline of the schedule as it ran.
func (r *runner) cutOffTimeline(eff Schedule) cutOff {
	n := eff.Slots()
	c := cutOff{steps: make([][]bool, n)}
	k := int(eff.Span/cutStep) + 1
	for m := range c.steps {
		c.steps[m] = make([]bool, k)
	}
	for step := 0; step < k; step++ {
		t := time.Duration(step) * cutStep
		voters, known := r.members.configAt(t)
		if !known {
			continue
		}
		up := func(x int) bool { return !eff.faultOn(x, t, Kill, PowerLoss, Pause, BitFlip) }
		linked := func(x, y int) bool { return !eff.linkCut(x, y, t) }
		for _, m := range voters {
			c.steps[m][step] = up(m) && !reachesQuorum(voters, m, up, linked)
		}
	}
	return c
}

// reachesQuorum reports whether some majority of voters is up, pairwise
// linked, and holds m or a member linked to m.
func reachesQuorum(voters []int, m int, up func(int) bool, linked func(x, y int) bool) bool {
	n := len(voters)
	for set := 1; set < 1<<n; set++ {
		size, ok, near := 0, true, false
		for xi := 0; xi < n && ok; xi++ {
			if set&(1<<xi) == 0 {
				continue
			}
			x := voters[xi]
			size++
			ok = up(x)
			near = near || x == m || linked(m, x)
			for yi := xi + 1; yi < n && ok; yi++ {
				if set&(1<<yi) != 0 {
					ok = linked(x, voters[yi])
				}
			}
		}
		if ok && near && size > n/2 {
			return true
		}
	}
	return false
}

// linkCut reports whether the schedule cuts the link x–y at offset t, in
// either direction, for certain: a partition between them, a bridge or a
// one-way cut on it, a mute of either (a request or its answer cannot
// pass). A flapping or lossy link is not cut.
func (s Schedule) linkCut(x, y int, t time.Duration) bool {
	for _, a := range s.Actions {
		if t < a.At || t >= a.End() {
			continue
		}
		switch a.Kind {
		case Partition:
			if a.has(x) != a.has(y) {
				return true
			}
		case Bridge, OneWay:
			if a.has(x) && a.has(y) {
				return true
			}
		case Mute:
			if a.has(x) || a.has(y) {
				return true
			}
		}
	}
	return false
}
