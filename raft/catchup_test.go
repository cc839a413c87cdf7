package raft_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
)

// progressOf returns member id's line in st.Progress.
func progressOf(st raft.Status, id string) (raft.MemberProgress, bool) {
	for _, p := range st.Progress {
		if p.ID == id {
			return p, true
		}
	}
	return raft.MemberProgress{}, false
}

// watchProgress samples the leader's progress line of id until stop, and
// returns the highest stream rates seen and the states in order.
type progressSampler struct {
	mu        sync.Mutex
	states    []string
	maxBytes  float64
	maxEntry  float64
	installed bool
}

// sampleProgress polls the leader among the cluster's members as they are
// now (a copy: Join grows c.Nodes meanwhile).
func sampleProgress(c *clustertest.NodeCluster, id string, stop <-chan struct{}) (*progressSampler, *sync.WaitGroup) {
	s := &progressSampler{}
	nodes := append([]*raft.Node(nil), c.Nodes...)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // sampling period
			}
			var p raft.MemberProgress
			ok := false
			for _, n := range nodes {
				if n == nil {
					continue
				}
				if st := n.Status(); st.Role == "Leader" {
					p, ok = progressOf(st, id)
				}
			}
			if !ok {
				continue
			}
			s.mu.Lock()
			if len(s.states) == 0 || s.states[len(s.states)-1] != p.State {
				s.states = append(s.states, p.State)
			}
			s.maxBytes, s.maxEntry = max(s.maxBytes, p.BytesPerSecond), max(s.maxEntry, p.EntriesPerSecond)
			s.installed = s.installed || p.SnapshotBytesSent > 0
			s.mu.Unlock()
		}
	}()
	return s, &wg
}

// Two members are added to a three-member cluster under a load of
// proposals from every member: each joins as a non-voter, catches up
// (the second from a snapshot: the leader compacts its log first), is
// promoted by the leader's policy (EventMemberPromoted) and shows as a
// caught-up voter in the leader's Status.Progress; every proposal outcome
// holds against what every member applied. The time to promote and the
// stream rates are reported.
func TestAddMembersUnderLoadArePromotedByThePolicy(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.TrailingLogs = 32 })
	l := c.WaitLeader(wait)
	events, cancelEvents := c.Nodes[l].Events(1024)
	defer cancelEvents()
	led := newLedger()
	stop := make(chan struct{})
	wg := loadNodes(c, "x", 3, led, stop)
	clustertest.WaitFor(t, wait, "some load committed", func() bool { return led.successes() >= 200 })
	if err := c.Nodes[l].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m3", "m4"} {
		stopSample := make(chan struct{})
		sampler, swg := sampleProgress(c, id, stopSample)
		start := time.Now()
		c.Join(l, id, 2*wait)
		took := time.Since(start)
		close(stopSample)
		swg.Wait()
		t.Logf("%s promoted after %s; states %v; peak stream %.0f B/s, %.0f entries/s; snapshot sent: %v",
			id, took.Round(time.Millisecond), sampler.states, sampler.maxBytes, sampler.maxEntry, sampler.installed)
		if len(sampler.states) > 0 && sampler.states[0] != raft.StateCatchingUp && sampler.states[0] != raft.StateCaughtUp {
			t.Fatalf("%s first seen as %s", id, sampler.states[0])
		}
	}
	close(stop)
	wg.Wait()
	c.Settle(wait)
	c.WaitConverged(2 * wait)
	led.check(t, dumpAll(c))
	l = c.WaitLeader(wait)
	clustertest.WaitFor(t, wait, "m3 and m4 caught-up voters in the leader's progress", func() bool {
		st := c.Nodes[l].Status()
		for _, id := range []string{"m3", "m4"} {
			p, ok := progressOf(st, id)
			if !ok || !p.Voter || p.State != raft.StateCaughtUp {
				return false
			}
		}
		return true
	})
	promoted := map[string]bool{}
	clustertest.WaitFor(t, wait, "promotion events", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventMemberPromoted {
					promoted[e.Member.ID] = true
				}
			default:
				return promoted["m3"] && promoted["m4"]
			}
		}
	})
}

// slowFS delays every fsync of the log: a member on a slow disk.
type slowFS struct {
	wal.OSFS
	delay time.Duration
}

func (s slowFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := s.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowFile{File: f, delay: s.delay}, nil
}

type slowFile struct {
	wal.File
	delay time.Duration
}

func (f slowFile) Sync() error {
	time.Sleep(f.delay) // the slow disk itself, not a wait for state
	return f.File.Sync()
}

// cpuWindow counts the successful proposals in led against the CPU time
// the test process used (stalltest.CPUWindow): the process hosts the
// whole cluster, and the machine's other load moves the share of the
// cores it gets, not the work it does per proposal.
func cpuWindow(led *ledger) stalltest.CPUWindow {
	return stalltest.StartCPU(func() int64 { return int64(led.successes()) })
}

// maxCatchUpExcess bounds the share of the cluster's CPU a member catching
// up may take: where the CPU is what limits the cluster, its submit rate
// drops by that share (docs/catchup.md, "Measuring what catch-up costs").
const maxCatchUpExcess = 0.2

// aroundWindow is the length of each window the cost around a catch-up is
// fitted on.
const aroundWindow = 2 * time.Second

// cpuRate is cpuWindow over d.
func cpuRate(led *ledger, d time.Duration) stalltest.Rate {
	w := cpuWindow(led)
	<-time.After(d) // the measurement window
	return w.End()
}

// A member whose disk is too slow to keep up (every fsync takes three
// election timeouts) is added under load: it is never promoted; the leader
// names it stalled, with the reason (EventMemberStalled, Status.Progress),
// AddMember returns ErrStalled; what the attempt costs the cluster stays
// within 20% (neverPromoted).
func TestSlowMemberIsNeverPromotedAndNamedStalled(t *testing.T) {
	var c *clustertest.NodeCluster
	c = clustertest.StartNodesWAL(t, 3, nil, func(cfg *raft.Config) { cfg.CatchUp = catchup.Policy{MaxRounds: 4} }, func(i int) []wal.Option {
		if i < 3 {
			return nil // the slow disk is the added member's (m3) only
		}
		return []wal.Option{wal.WithFS(slowFS{delay: 3 * c.Cfgs[0].ElectionTimeout})}
	})
	checkCost(t, neverPromoted(t, c, nil, nil, catchup.ReasonTooSlow))
}

// A member whose links from the others drop every append (and every
// progress request: the links are cut one way, from each of the three,
// whichever leads, to the member) is added under load: never promoted,
// named stalled (unreachable: no report came for UnreachableRounds
// election timeouts), its cost held within 20%.
func TestCutOffMemberIsNeverPromotedAndNamedStalled(t *testing.T) {
	faults := faultnet.New(time.Now().UnixNano())
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.CatchUp = catchup.Policy{UnreachableRounds: 10} })
	checkCost(t, neverPromoted(t, c, nil, func(from, n int) { c.Faults.Cut(addr(c.Nodes[from]), addr(c.Nodes[n])) }, catchup.ReasonUnreachable))
}

// A member whose links from the others lose 90% of their messages
// (appends, snapshot chunks and progress requests alike, from each of the
// three, whichever leads; the seed replays the losses) is added under
// load: never promoted, named stalled, its cost held within 20%.
func TestLossyLinkMemberIsNeverPromotedAndNamedStalled(t *testing.T) {
	s, _ := scenarioRand(t) // logs the seed; -raft.seed replays it
	faults := faultnet.New(s)
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.CatchUp = catchup.Policy{MaxRounds: 4} })
	checkCost(t, neverPromoted(t, c, nil, func(from, n int) { c.Faults.DropLink(addr(c.Nodes[from]), addr(c.Nodes[n]), 0.9) }, catchup.ReasonTooSlow))
}

// neverPromoted adds member m3 (its config tweaked, impaired once started:
// impair is called for each of the three as from) to c under load, and
// checks it is never promoted and is named stalled with reason want ("":
// any reason). It returns the share of the test process's CPU the attempt
// (the add until AddMember gives up) took beyond what its proposals and
// length cost in six windows around it (three before, three after the
// member's removal; stalltest.FitCost), with the noise of those windows
// (stalltest.Judgement): checkCost bounds it. The process hosts
// the whole cluster and the impaired member: the machine's other load
// moves the share of the cores it gets, not the CPU a proposal costs
// (docs/catchup.md, "Measuring what catch-up costs").
func neverPromoted(t *testing.T, c *clustertest.NodeCluster, tweak func(*raft.Config), impair func(from, member int), want catchup.Reason) (cost stalltest.Judgement) {
	t.Helper()
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	mcfg := metrics.DefaultConfig("test")
	mcfg.EnableHostname, mcfg.EnableRuntimeMetrics = false, false
	if _, err := metrics.NewGlobal(mcfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { metrics.NewGlobal(mcfg, &metrics.BlackholeSink{}) })
	l := c.WaitLeader(wait)
	// Events from each of the three: the leadership may move under load
	// (AddMember is then asked again of the next leader).
	var events []<-chan raft.Event
	for i := range 3 {
		ch, cancelEvents := c.Nodes[i].Events(1024)
		t.Cleanup(cancelEvents)
		events = append(events, ch)
	}
	led := newLedger()
	stop := make(chan struct{})
	wg := loadNodes(c, "x", 8, led, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	clustertest.WaitFor(t, wait, "some load committed", func() bool { return led.successes() >= 100 })
	// The windows around the attempt: three before it, three after the
	// member's removal (aroundWindow each).
	around := []stalltest.Rate{cpuRate(led, aroundWindow), cpuRate(led, aroundWindow), cpuRate(led, aroundWindow)}

	slow := c.NewMember("m3", tweak)
	if impair != nil {
		for i := range 3 { // from each: whichever leads
			impair(i, slow)
		}
	}
	type result struct{ err error }
	done := make(chan result, 1)
	attempt := cpuWindow(led)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
		defer cancel()
		// Asked of a follower: the leader's verdict comes back over the
		// forward, ErrStalled included.
		done <- result{c.Nodes[(l+1)%3].AddMember(ctx, "m3", c.Nodes[slow].Addr())}
	}()
	var res result
	clustertest.WaitFor(t, 4*wait, "AddMember to give up", func() bool {
		select {
		case res = <-done:
			return true
		default:
			return false
		}
	})
	during := attempt.End() // over the whole attempt
	if !errors.Is(res.err, raft.ErrStalled) {
		t.Fatalf("AddMember of an impaired member: %v, want ErrStalled", res.err)
	}
	t.Logf("AddMember: %v", res.err)
	verdictTerm := maxTerm(c)
	// The leader's progress line (polled). The verdict is the attempt's:
	// a leader elected after it (in a later term, under load) never ran
	// the attempt, so for it m3 is a non-voter that is not a candidate —
	// its line must not say caught up or voter, and need not say stalled.
	var st raft.Status
	var p raft.MemberProgress
	defer func() {
		if t.Failed() {
			t.Logf("the leader's last progress of m3: %+v", p)
		}
	}()
	clustertest.WaitFor(t, wait, "the leader's progress naming m3 a stalled non-voter, reason "+string(want), func() bool {
		l := c.Leader()
		if l < 0 {
			return false
		}
		st = c.Nodes[l].Status()
		var ok bool
		p, ok = progressOf(st, "m3")
		if ok && st.Term > verdictTerm && p.State != "" {
			t.Logf("leader %s elected in term %d after the verdict (term %d): m3 %s", st.ID, st.Term, verdictTerm, p.State)
			return !p.Voter && p.State != raft.StateCaughtUp
		}
		return ok && p.State == raft.StateStalled && (want == "" || p.Reason == string(want)) && p.Reason != "" && !p.Voter
	})
	for _, m := range st.Members {
		if m.ID == "m3" && m.Voter {
			t.Fatal("the slow member was promoted")
		}
	}
	var stalled *raft.Event
	clustertest.WaitFor(t, wait, "EventMemberStalled for m3", func() bool {
		for _, ch := range events {
		drain:
			for {
				select {
				case e := <-ch:
					if e.Kind == raft.EventMemberStalled && e.Member.ID == "m3" {
						stalled = &e
					}
					if e.Kind == raft.EventMemberPromoted && e.Member.ID == "m3" {
						t.Fatal("EventMemberPromoted for the slow member")
					}
				default:
					break drain
				}
			}
		}
		return stalled != nil
	})
	t.Logf("stalled: reason %s (%s)", stalled.Progress.Reason, stalled.Progress.Detail)
	checkMetricHelp(t, sink)
	if g, ok := sink.Data()[0].Gauges["test.jobraft.catchup.stalled;member=m3"]; !ok || g.Value != 1 {
		t.Fatalf("gauge jobraft.catchup.stalled{member=m3}: %+v (present %t), want 1", g, ok)
	}
	// What the seam did with the installs m3 was sent (an install it
	// refuses is sent again whole: part of the attempt's cost).
	t.Logf("m3's seam: %+v", c.Nodes[slow].Status().Seam)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].RemoveMember(ctx, "m3"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		around = append(around, cpuRate(led, aroundWindow))
	}
	cost = stalltest.Judge(t, "while the member tried to catch up", "after its removal", around, during)
	close(stop)
	wg.Wait()
	c.Settle(wait)
	c.WaitConvergedOf(wait, 0, 1, 2)
	led.check(t, dumpAll(c, 0, 1, 2))
	return cost
}

// checkCost fails t when a member's attempt took more than
// maxCatchUpExcess of the cluster's CPU beyond the measurement's noise
// (neverPromoted's verdict; stalltest.Judgement.Exceeds).
func checkCost(t *testing.T, cost stalltest.Judgement) {
	t.Helper()
	// Under the race detector the catch-up's own work (the monitor's polls,
	// failing sends, the membership changes) costs several times its CPU
	// while the cluster gets no more of the machine: its share is not the
	// product's. The bound is checked without it (make test runs these
	// tests once more without -race).
	if !raceEnabled && cost.Exceeds(maxCatchUpExcess) {
		t.Fatalf("the member's attempt took %.0f%% of the cluster's CPU beyond what its proposals and length cost around it: over %.0f%% and the %.0f%% the windows around it miss by, the submit rate of a cluster limited by its CPU drops by as much",
			100*cost.Excess, 100*maxCatchUpExcess, 100*cost.Noise)
	}
}

// A member is added while the leadership moves: AddMember, asked of the
// old leader, is asked again of the new one (it is idempotent) and ends
// with the member a voter, promoted by the new leader's policy.
func TestAddWhileTheLeaderChanges(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 50)
	n := c.NewMember("m3", nil)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
		defer cancel()
		done <- c.Nodes[(l+1)%3].AddMember(ctx, "m3", c.Nodes[n].Addr())
	}()
	to := (l + 2) % 3
	clustertest.WaitFor(t, wait, "the leadership to move", func() bool {
		cur := c.Leader()
		if cur == to {
			return true
		}
		if cur >= 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := c.Nodes[cur].TransferLeadership(ctx, c.Cfgs[to].ID); err != nil {
				t.Logf("transfer (retried): %v", err)
			}
		}
		return false
	})
	var err error
	clustertest.WaitFor(t, 3*wait, "AddMember to return", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Fatalf("AddMember across a leader change: %v", err)
	}
	waitVoters(t, c, c.WaitLeader(wait), "m0", "m1", "m2", "m3")
	proposeN(t, c, n, "b", 5)
	c.WaitConverged(wait)
}

// A member cut off while the leader compacts past its log, then back: the
// leader's monitor shows it behind while it is gone (with its lag, named
// unreachable once that lasts), streams it a snapshot (counted in its
// progress line) and shows it caught up once it converged.
func TestReturningMemberGetsASnapshotAndIsShownCaughtUp(t *testing.T) {
	faults := faultnet.New(time.Now().UnixNano())
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) {
		cfg.TrailingLogs = 8
		cfg.CatchUp = catchup.Policy{UnreachableRounds: 4}
	})
	l := c.WaitLeader(wait)
	gone := (l + 1) % 3
	id := c.Cfgs[gone].ID
	faults.Isolate(addr(c.Nodes[gone]))
	for k := 0; k < 100; k++ {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("s%d=1", k), wait)
	}
	l = c.WaitLeader(wait)
	if err := c.Nodes[l].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first := c.Nodes[l].Status().FirstIndex; first <= c.Nodes[gone].Status().LastIndex+1 {
		t.Fatalf("leader log starts at %d: no install would be needed", first)
	}
	clustertest.WaitFor(t, wait, "the leader to name the cut-off member unreachable", func() bool {
		p, ok := progressOf(c.Nodes[l].Status(), id)
		return ok && p.State == raft.StateStalled && p.Reason == string(catchup.ReasonUnreachable)
	})
	faults.Heal()
	c.WaitConverged(wait)
	clustertest.WaitFor(t, wait, "the returned member caught up in the leader's progress, its snapshot counted", func() bool {
		l := c.Leader()
		if l < 0 {
			return false
		}
		p, ok := progressOf(c.Nodes[l].Status(), id)
		return ok && p.State == raft.StateCaughtUp && p.Lag == 0 && p.SnapshotBytesSent > 0
	})
	if c.KVs[gone].Len() != 100 {
		t.Fatalf("returned member holds %d keys", c.KVs[gone].Len())
	}
}

// A dead member is replaced under its own ID: removed, then a new process
// with a fresh data dir (and a new address) is added under the same ID. It
// joins as a non-voter, is promoted by the policy, and the three converge.
func TestReplaceDeadMemberUnderItsOwnID(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 20)
	dead := (l + 1) % 3
	id := c.Cfgs[dead].ID
	c.StopMember(dead)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	if err := c.Nodes[l].RemoveMember(ctx, id); err != nil {
		t.Fatal(err)
	}
	proposeN(t, c, l, "b", 10)
	n := c.NewMember(id, nil)
	if c.Cfgs[n].DataDir == c.Cfgs[dead].DataDir {
		t.Fatal("the replacement reuses the dead member's data dir")
	}
	if err := c.Nodes[(l+2)%3].AddMember(ctx, id, c.Nodes[n].Addr()); err != nil {
		t.Fatalf("add the replacement: %v", err)
	}
	live := []int{l, (l + 2) % 3, n}
	for _, i := range live {
		waitVoters(t, c, i, c.Cfgs[l].ID, c.Cfgs[(l+2)%3].ID, id)
	}
	proposeN(t, c, n, "c", 5)
	c.WaitConvergedOf(wait, live...)
	if got := c.KVs[n].Len(); got != 35 {
		t.Fatalf("the replacement holds %d keys, want 35", got)
	}
}

// checkMetricHelp: every jobraft key the sink saw (the catch-up monitor's
// included) is described by its package's MetricHelp, which exporters use
// as HELP (jobd's /metrics test fails on an undescribed key, but only when
// its scrape happens to see the key).
func checkMetricHelp(t *testing.T, sink *metrics.InmemSink) {
	t.Helper()
	help := raft.MetricHelp()
	maps.Copy(help, wal.MetricHelp())
	for _, iv := range sink.Data() {
		keys := slices.Collect(maps.Keys(iv.Gauges))
		keys = slices.AppendSeq(keys, maps.Keys(iv.Counters))
		keys = slices.AppendSeq(keys, maps.Keys(iv.Samples))
		for _, k := range keys {
			k = strings.TrimPrefix(k, "test.")
			if i := strings.IndexByte(k, ';'); i >= 0 {
				k = k[:i]
			}
			if strings.HasPrefix(k, "jobraft.") && help[k] == "" {
				t.Errorf("metric %s has no MetricHelp entry", k)
			}
		}
	}
}
