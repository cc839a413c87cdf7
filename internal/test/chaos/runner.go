package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// Options tune a run.
type Options struct {
	// ElectionTimeout of the members (heartbeat timeout too); default 200ms.
	ElectionTimeout time.Duration
	// Converge bounds the final phase's convergence (default 30s, widened
	// by measured stalls).
	Converge time.Duration
	// PictureDir, when set, receives the run's picture (seed-N.html).
	PictureDir string
}

// Verdict is one checker's judgement of a run.
type Verdict struct {
	Checker string
	OK      bool
	Detail  string
	At      time.Duration // when a violation was seen (since the run's start)
	Index   uint64        // the raft index it concerns, when one does
	// Members are the members (slots) a violation concerns, when known: a
	// lie run excuses some checkers' violations by the members they name.
	Members []int
	// Judged is how many observations a passing checker judged, when it
	// counts them (leader-wait: operations on cut-off members).
	Judged int
}

func (v Verdict) String() string {
	if v.OK {
		return v.Checker + ": ok " + v.Detail
	}
	s := fmt.Sprintf("%s: FAIL at %s", v.Checker, v.At.Round(time.Millisecond))
	if v.Index > 0 {
		s += fmt.Sprintf(" index %d", v.Index)
	}
	return s + ": " + v.Detail
}

// Result is a run's outcome.
type Result struct {
	Schedule Schedule
	Verdicts []Verdict // every checker's verdict; failures first seen first
	Picture  string    // the picture's path ("" when none was written)
	Wall     time.Duration
	Ops      int
	Samples  int
	Replay   string // the command that replays the run (set by the caller)
}

// Failed returns the failing verdicts.
func (r Result) Failed() []Verdict {
	var out []Verdict
	for _, v := range r.Verdicts {
		if !v.OK {
			out = append(out, v)
		}
	}
	return out
}

// Checkers lists the failing checkers' names ("" when it passed).
func (r Result) Checkers() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range r.Failed() {
		if !seen[v.Checker] {
			seen[v.Checker] = true
			out = append(out, v.Checker)
		}
	}
	sort.Strings(out)
	return out
}

// runner is one run's state.
type runner struct {
	t      testing.TB
	s      Schedule
	o      Options
	p      *clustertest.CtlProcs
	start  time.Time
	obs    *observer
	wl     *workload
	faults *faultState
	// members: the configuration as the harness changed it (Add, Remove,
	// Replace).
	members *members

	mu      sync.Mutex
	down    []bool // killed (or refused to start)
	paused  []bool
	flipped []bool // took a bit flip
	refused []bool // exited on its own after a bit flip
	lied    []bool // restarted with a log that lost what it wrote during a lie
	lies    []lieSpan
	losses  []loss          // power losses that took effect (powerloss.go)
	started []time.Duration // when each member's process was last started (0: at the run's start)
	// restartFloors[i][k]: the commit floor on disk when member i's
	// process started for the k-th time (its k-th Started record; k >= 1)
	restartFloors []map[int]uint64
	violation     []Verdict
	events        []Event
	exits         []Event
	memberBusy    []bool                        // a member fault is in force on the member
	resolved      map[int]Action                // the actions started, made concrete (resolve)
	converged     uint64                        // the applied index the final phase converged at
	diverged      map[int]*raft.Divergence      // members that reported Status.Diverged in the final phase
	finalLead     int                           // the leader of the final phase's last status round (-1: none)
	lists         map[int][]clustertest.JobView // the live members' jobs after convergence
	depLists      map[int][]clustertest.JobView // their jobs of the dependency client's queues (deps.go)
}

func (r *runner) since() time.Duration { return time.Since(r.start) }

// lieSpan is a lie that took effect: action k's member lied from at and
// lost what its log wrote since when its power went at lost.
type lieSpan struct {
	k, member int
	at, lost  time.Duration
}

// slotsOf returns the slots of the member IDs named ("" skipped).
func (r *runner) slotsOf(ids ...string) []int {
	var out []int
	for _, id := range ids {
		for i := range r.p.Cfgs {
			if id != "" && r.p.Cfgs[i].ID == id {
				out = append(out, i)
			}
		}
	}
	return out
}

// lieRun returns the lies that took effect (none: the run is judged as
// any other).
func (r *runner) lieRun() []lieSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lieSpan(nil), r.lies...)
}

// violate records a safety violation the moment a checker sees it.
func (r *runner) violate(v Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.violation {
		if o.Checker == v.Checker && o.Detail == v.Detail {
			return
		}
	}
	r.violation = append(r.violation, v)
}

// running reports whether member i's process is up (it may be paused).
func (r *runner) running(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.down[i]
}

// pickMember picks a running voter for a client call (any voter when
// none runs).
func (r *runner) pickMember(rng *rand.Rand) int {
	voters := r.members.votersSnapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(voters)
	if n == 0 {
		return 0
	}
	k := rng.IntN(n)
	for j := 0; j < n && r.down[voters[k]]; j++ {
		k = (k + 1) % n
	}
	return voters[k]
}

// Run runs schedule s on a fresh cluster of s.Members processes (and
// s.Spare spares, started empty outside the configuration) and
// returns every checker's verdict. A harness failure (a process that will
// not start) fails t; a checker's violation is a verdict, not a test
// failure: the caller decides.
func Run(t testing.TB, s Schedule, o Options) Result {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = 200 * time.Millisecond
	}
	if o.Converge <= 0 {
		o.Converge = 30 * time.Second
	}
	wall := time.Now()
	n := s.Slots()
	r := &runner{t: t, s: s, o: o,
		down: make([]bool, n), paused: make([]bool, n),
		flipped: make([]bool, n), refused: make([]bool, n), lied: make([]bool, n), restartFloors: make([]map[int]uint64, n),
		memberBusy: make([]bool, n), started: make([]time.Duration, n), resolved: map[int]Action{}, members: newMembers(s),
		diverged: map[int]*raft.Divergence{}, finalLead: -1}
	r.p = clustertest.StartCtlProcs(t, n, func(i int, mc *clustertest.MemberConfig) {
		mc.Join = i >= s.Members // a spare: empty, outside the configuration until added
		mc.Faults = true
		mc.ElectionTimeout = o.ElectionTimeout
		mc.Timing.LeaderWait = memberLeaderWait
		mc.LeaseTTL = leaseTTL
		mc.Snapshots = true // lagging members catch up by snapshot install too
	})
	r.faults = newFaultState(r)
	r.p.WaitLeader(30 * time.Second)
	setup := time.Since(wall)
	r.start = time.Now()
	r.obs = newObserver(r)
	stopObs := make(chan struct{})
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); r.obs.run(stopObs) }()
	stopApplied := make(chan struct{})
	appliedDone := make(chan struct{})
	go func() { defer close(appliedDone); r.appliedLoop(stopApplied) }()
	r.wl = newWorkload(r)
	r.wl.start(s.Seed)

	r.execute()
	healAt := r.since()
	r.healAll()
	r.wl.halt()

	var verdicts []Verdict
	verdicts = append(verdicts, r.finalPhase(healAt)...)
	r.stopMembership()
	close(stopApplied)
	<-appliedDone
	close(stopObs)
	<-obsDone
	finalAt := time.Now()
	verdicts = append(verdicts, r.finalChecks()...)
	r.note(-1, "phases: setup %s, faults %s, final phase %s, final checks %s", setup.Round(time.Millisecond), healAt.Round(time.Millisecond),
		finalAt.Sub(r.start.Add(healAt)).Round(time.Millisecond), time.Since(finalAt).Round(time.Millisecond))
	r.faults.close()

	r.mu.Lock()
	all := append(append([]Verdict(nil), r.violation...), verdicts...)
	r.mu.Unlock()
	all, excused := r.excuse(all)
	res := Result{Schedule: s, Verdicts: append(all, excused...)}
	res.Verdicts = append(res.Verdicts, r.continuousVerdicts()...)
	res.Ops, res.Samples = len(r.wl.all()), len(r.obs.all())
	res.Wall = time.Since(wall)
	if o.PictureDir != "" {
		path := filepath.Join(o.PictureDir, fmt.Sprintf("seed-%d.html", s.Seed))
		if err := os.MkdirAll(o.PictureDir, 0o755); err == nil {
			if err := os.WriteFile(path, r.picture(res), 0o644); err == nil {
				res.Picture = path
			}
		}
	}
	return res
}

// continuousVerdicts are the OK verdicts of the continuous checkers that
// saw nothing.
func (r *runner) continuousVerdicts() []Verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, v := range r.violation {
		seen[v.Checker] = true
	}
	var out []Verdict
	for _, c := range []string{"election", "digest", "outcome-class", "watch"} {
		if !seen[c] {
			out = append(out, Verdict{Checker: c, OK: true})
		}
	}
	if !seen["powerloss"] {
		out = append(out, r.powerlossVerdictLocked())
	}
	return out
}

// appliedLoop runs the applied-history check every 500ms.
func (r *runner) appliedLoop(stop <-chan struct{}) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		vs, err := r.p.AppliedViolations(false)
		if err != nil {
			continue // a running check skips what it cannot read
		}
		for _, v := range vs {
			r.violate(Verdict{Checker: "applied", At: r.since(), Detail: v.String(), Members: r.slotsOf(v.Member, v.Other)})
		}
	}
}
