package chaos

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Event is something the harness did or saw happen to a member, for the
// picture and the verdicts' details.
type Event struct {
	At     time.Duration
	Member int // -1: the cluster
	What   string
}

func (r *runner) note(m int, format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, Event{At: r.since(), Member: m, What: fmt.Sprintf(format, args...)})
	r.mu.Unlock()
}

func (r *runner) isPaused(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused[i]
}

func (r *runner) setDown(i int, down bool) {
	r.mu.Lock()
	r.down[i] = down
	r.mu.Unlock()
}

// step is one timed edge of the schedule: action k starts or ends.
type edge struct {
	at    time.Duration
	k     int
	start bool
}

// execute runs the schedule's fault phase: every action's start and end
// at its time, and the watch for processes that exit on their own.
func (r *runner) execute() {
	var edges []edge
	for k, a := range r.s.Actions {
		edges = append(edges, edge{a.At, k, true})
		if !a.Kind.instant() {
			edges = append(edges, edge{a.End(), k, false})
		}
	}
	sort.SliceStable(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return !edges[i].start && edges[j].start // ends first
	})
	for _, e := range edges {
		r.waitUntil(e.at)
		a := r.s.Actions[e.k]
		if e.start {
			r.begin(e.k, a)
		} else {
			r.end(e.k, a)
		}
	}
	r.waitUntil(r.s.Span)
}

// waitUntil sleeps until offset at of the run, watching for members that
// exit on their own meanwhile (the faults are timed: this is a schedule,
// not a wait for state).
func (r *runner) waitUntil(at time.Duration) {
	for {
		r.watchExits()
		d := at - r.since()
		if d <= 0 {
			return
		}
		time.Sleep(min(d, 10*time.Millisecond))
	}
}

// watchExits marks members whose process exited without being killed.
func (r *runner) watchExits() {
	for i := 0; i < r.s.Slots(); i++ {
		if r.running(i) && r.p.Exited(i) {
			r.setDown(i, true)
			r.mu.Lock()
			r.exits = append(r.exits, Event{At: r.since(), Member: i, What: "exited"})
			r.mu.Unlock()
			r.note(i, "process exited on its own")
		}
	}
}

func (r *runner) restart(i int, why string) {
	if r.members.isRemoved(i) {
		r.note(i, "not started (%s): removed from the configuration", why)
		return
	}
	r.p.Kill(i)
	r.noteRestartFloor(i)
	r.p.Start(i)
	r.faults.restarted(i)
	r.mu.Lock()
	r.started[i] = r.since()
	r.mu.Unlock()
	r.setDown(i, false)
	r.note(i, "started (%s)", why)
}

// resolve makes action k concrete when it starts: a Leader reference
// becomes the member leading in the latest status round. It returns false
// (and the action is skipped) when no leader is known or a member fault
// would land on a member that is down or paused.
func (r *runner) resolve(k int, a Action) (Action, bool) {
	a.Members = slices.Clone(a.Members)
	for i, m := range a.Members {
		if m == Isolated {
			l := r.isolated()
			if l < 0 {
				r.note(-1, "skip %s: no member cut off alone", a)
				return a, false
			}
			a.Members[i] = l
			continue
		}
		if m != Leader && m != Follower && m != Follower2 {
			continue
		}
		l := r.obs.leader()
		if l < 0 {
			r.note(-1, "skip %s: no leader known", a)
			return a, false
		}
		if m == Follower || m == Follower2 {
			f := r.follower(l, m == Follower2)
			if f < 0 {
				r.note(-1, "skip %s: no running follower", a)
				return a, false
			}
			a.Members[i] = f
			continue
		}
		for slices.Contains(a.Members, l) { // a pair naming the leader twice: the next member
			l = (l + 1) % r.s.Slots()
		}
		a.Members[i] = l
	}
	switch a.Kind {
	case Remove, Replace:
		if m := a.Members[0]; !r.members.inConfig(m) {
			r.note(m, "skip %s: m%d is not a voter", a, m)
			return a, false
		}
	}
	switch a.Kind {
	case Kill, Pause, Fsync, DiskFull, Skew, BitFlip, Lie, PowerLoss:
		m := a.Members[0]
		r.mu.Lock()
		busy := r.down[m] || r.paused[m] || r.memberBusy[m]
		if !busy {
			r.memberBusy[m] = true
		}
		r.mu.Unlock()
		if busy {
			r.note(m, "skip %s: m%d is down, paused or under another member fault", a, m)
			return a, false
		}
	}
	r.mu.Lock()
	a.At = r.since().Round(time.Millisecond) // as it ran: the executor may run late on a loaded machine
	r.resolved[k] = a
	r.mu.Unlock()
	return a, true
}

func (r *runner) begin(k int, a Action) {
	a, ok := r.resolve(k, a)
	if !ok {
		return
	}
	m := -1
	if len(a.Members) > 0 {
		m = a.Members[0]
	}
	r.note(m, "begin %s", a)
	switch a.Kind {
	case Kill:
		r.setDown(m, true)
		r.p.Kill(m)
	case Pause:
		if r.running(m) {
			r.mu.Lock()
			r.paused[m] = true
			r.mu.Unlock()
			r.p.Pause(m)
		}
	case BitFlip:
		r.setDown(m, true)
		r.p.Kill(m)
		r.mu.Lock()
		r.flipped[m] = true
		r.mu.Unlock()
		r.note(m, "%s", flipBit(r.p.Cfgs[m].DataDir, a.Target, r.s.Seed+uint64(k)))
	case Skew:
		r.p.Cfgs[m].ClockOffset = a.Skew
		r.restart(m, "clock skewed "+a.Skew.String())
	case Lie:
		r.lie(k, m)
	case PowerLoss:
		r.powerLoss(m)
	case Transfer:
		go r.transfer()
	case Add, Remove, Replace:
		r.change(a)
	default:
		r.faults.set(k, a, true)
	}
}

// lie starts action k's lying disk on member m: the member copies its
// log's segments (POST /lie); a member that does not answer is not lied
// to, and the action is skipped.
func (r *runner) lie(k, m int) {
	rep, err := r.p.CallT(m, "/lie", clustertest.Request{}, 2*time.Second)
	if err != nil || rep.Outcome != clustertest.OutcomeOK {
		r.note(m, "skip lie: m%d took no copy of its log: %v %s", m, err, rep.Error)
		r.mu.Lock()
		delete(r.resolved, k)
		r.memberBusy[m] = false
		r.mu.Unlock()
		return
	}
	r.note(m, "lie: its log's fsyncs lie from now on (its segments copied)")
}

// loseLog ends action k's lying disk: the member is killed, its log loses
// everything it wrote since the lie began, and it restarts.
func (r *runner) loseLog(k, m int) {
	r.setDown(m, true)
	r.p.Kill(m)
	before, after, err := r.p.LoseLog(m)
	if err != nil {
		r.note(m, "lie: log not rolled back: %v", err)
	} else {
		r.mu.Lock()
		r.lied[m] = true
		r.lies = append(r.lies, lieSpan{k: k, member: m, at: r.resolved[k].At, lost: r.since().Round(time.Millisecond)})
		r.mu.Unlock()
		r.note(m, "lie: power lost, its log as it was when the lie began (%s, was %s)", after, before)
	}
	r.restart(m, "after lie")
}

func (r *runner) end(k int, _ Action) {
	r.mu.Lock()
	a, ok := r.resolved[k]
	r.mu.Unlock()
	if !ok {
		return // skipped at its start
	}
	defer func() {
		r.mu.Lock()
		if len(a.Members) > 0 {
			r.memberBusy[a.Members[0]] = false
		}
		ran := r.resolved[k]
		ran.For = r.since().Round(time.Millisecond) - ran.At // undone now, as it ran
		r.resolved[k] = ran
		r.mu.Unlock()
	}()
	m := -1
	if len(a.Members) > 0 {
		m = a.Members[0]
	}
	r.note(m, "end %s", a.Kind)
	switch a.Kind {
	case Kill, BitFlip, PowerLoss:
		r.restart(m, "after "+string(a.Kind))
	case Lie:
		r.loseLog(k, m)
	case Fsync, DiskFull:
		// The member's log failed closed (wal.ErrFailed) and stays failed
		// until reopened: the disk healed, the operator restarts it.
		r.faults.set(k, a, false)
		r.restart(m, "its disk healed")
	case Pause:
		r.p.Resume(m)
		r.mu.Lock()
		r.paused[m] = false
		r.mu.Unlock()
	case Skew:
		r.p.Cfgs[m].ClockOffset = 0
		r.restart(m, "clock true")
	default:
		r.faults.set(k, a, false)
	}
}

// transfer asks the current leader to hand leadership to any follower.
func (r *runner) transfer() {
	l := r.p.Leader()
	if l < 0 {
		r.note(-1, "transfer: no leader")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rep, err := r.p.Post(ctx, l, "/transfer", clustertest.Request{})
	r.note(l, "transfer: %s %v %s", rep.Outcome, err, rep.Error)
}

// healAll ends the fault phase: every fault undone, every member that is
// down started again (but a member that refused to start after a bit flip
// is left down, and one that exits again is noted by the final phase).
func (r *runner) healAll() {
	r.faults.mu.Lock()
	r.faults.active = map[int]Action{}
	r.faults.gen++
	r.faults.mu.Unlock()
	r.watchExits()
	for i := 0; i < r.s.Slots(); i++ {
		if r.members.isRemoved(i) {
			continue
		}
		if r.isPaused(i) {
			r.p.Resume(i)
			r.mu.Lock()
			r.paused[i] = false
			r.mu.Unlock()
		}
		if !r.running(i) {
			r.mu.Lock()
			flipped := r.flipped[i]
			r.mu.Unlock()
			if flipped {
				r.mu.Lock()
				r.refused[i] = true
				r.mu.Unlock()
				r.note(i, "left down: it exited after its bit flip")
				continue
			}
			r.restart(i, "final phase")
		}
	}
	r.note(-1, "healed: final phase")
}

// flipBit flips one bit of one file of the member's log ("log": its
// segments) or snapshots ("snap"), chosen by seed, and says what it did.
func flipBit(dataDir, target string, seed uint64) string {
	var files []string
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dataDir, p)
		switch {
		case target == "log" && strings.HasSuffix(p, ".seg"):
			files = append(files, p)
		case target == "snap" && strings.Contains(rel, "snap"):
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	if len(files) == 0 {
		return "bit flip: no " + target + " file to flip"
	}
	rng := rand.New(rand.NewPCG(seed, 0xb17f11b))
	f := files[rng.IntN(len(files))]
	b, err := os.ReadFile(f)
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("bit flip: %s unreadable or empty", filepath.Base(f))
	}
	end := len(b) // flip inside the written part, not the preallocated zeros
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end == 0 {
		return fmt.Sprintf("bit flip: %s holds only zeros", filepath.Base(f))
	}
	off := rng.IntN(end)
	bit := byte(1) << rng.IntN(8)
	b[off] ^= bit
	if err := os.WriteFile(f, b, 0o644); err != nil {
		return fmt.Sprintf("bit flip: %v", err)
	}
	rel, _ := filepath.Rel(dataDir, f)
	return fmt.Sprintf("bit flip: %s offset %d of %d, bit %#02x", rel, off, len(b), bit)
}

// isolated returns the member the most recently started partition still
// in force cut off alone, or -1.
func (r *runner) isolated() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, at := -1, time.Duration(-1)
	for k, a := range r.resolved {
		if a.Kind == Partition && len(a.Members) == 1 && a.At > at && r.faults.inForce(k) {
			best, at = a.Members[0], a.At
		}
	}
	return best
}

// follower returns the lowest-numbered running, unpaused voter other
// than leader (second: the next one), or -1.
func (r *runner) follower(leader int, second bool) int {
	voters := r.members.votersSnapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range voters {
		if i != leader && !r.down[i] && !r.paused[i] {
			if !second {
				return i
			}
			second = false
		}
	}
	return -1
}
