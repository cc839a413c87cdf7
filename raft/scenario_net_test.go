package raft_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
)

// docs/scenarios.md 5–8: network faults over in-process clusters (real TCP on
// loopback, real data dirs, fsync) through a faultnet.Network, each
// under proposal load recorded in a ledger, each ending with the checkers of
// checkers_test.go. Every test prints its seed; -raft.seed=N replays the
// FaultNetwork's decisions (the interleaving stays up to the scheduler).
// -raft.long runs heavier variants (longer faults, more rounds).

func netLong() bool { return scenarioLong() }

// netSeed returns the scenario's seed and logs how to replay it.
func netSeed(t *testing.T) int64 {
	t.Helper()
	return scenarioSeed(t)
}

// Bounds shared by the scenarios (members run 150 ms heartbeat and election
// timeouts; -race on two shared cores stretches an election to a second or
// two, rarely more).
const (
	electBound    = 10 * time.Second // fault → a leader committed an entry of its term
	convergeBound = 15 * time.Second // faults stop → every member converged
)

// loadRun is a proposal load (startLoad or startLeaderLoad) that can be stopped
// once, idempotently.
type loadRun struct {
	stop chan struct{}
	wg   *sync.WaitGroup
	once sync.Once
}

// startLoad proposes unique keys (prefix-g-k) from workers goroutines,
// round-robin over every member (followers forward), like loadNodes but
// with a 1 s timeout per proposal: a worker stuck on a cut-off member comes
// back soon, and stopping the load does not wait long for it.
func startLoad(c *clustertest.NodeCluster, prefix string, workers int, l *ledger) *loadRun {
	r := &loadRun{stop: make(chan struct{}), wg: &sync.WaitGroup{}}
	nodes := append([]*raft.Node(nil), c.Nodes...)
	for g := 0; g < workers; g++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-r.stop:
					return
				default:
				}
				key := fmt.Sprintf("%s%d-%d", prefix, g, k)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := nodes[(g+k)%len(nodes)].Propose(ctx, []byte(key+"=v"))
				cancel()
				l.record(key, err)
			}
		}()
	}
	return r
}

func (r *loadRun) Stop() {
	r.once.Do(func() {
		close(r.stop)
		r.wg.Wait()
	})
}

// startLeaderLoad proposes unique keys only on the member that is leader,
// so that no proposal is forwarded (see TestScenarioDelayDropDuplicate for
// why). A worker whose member lost leadership finds the new leader.
func startLeaderLoad(c *clustertest.NodeCluster, prefix string, workers int, l *ledger) *loadRun {
	r := &loadRun{stop: make(chan struct{}), wg: &sync.WaitGroup{}}
	for g := 0; g < workers; g++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			cur := -1
			for k := 0; ; {
				select {
				case <-r.stop:
					return
				default:
				}
				if cur < 0 || c.Nodes[cur].Raft().State() != hraft.Leader {
					if cur = c.Leader(); cur < 0 {
						select {
						case <-r.stop:
							return
						case <-time.After(5 * time.Millisecond): // load pacing while there is no leader
						}
						continue
					}
				}
				key := fmt.Sprintf("%s%d-%d", prefix, g, k)
				k++
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := c.Nodes[cur].Propose(ctx, []byte(key+"=v"))
				cancel()
				l.record(key, err)
			}
		}()
	}
	return r
}

// committedLeader returns the member that is leader in a term above
// minTerm and has committed an entry of that term (its no-op barrier at
// least), or -1. Members in skip are not considered.
func committedLeader(c *clustertest.NodeCluster, minTerm uint64, skip ...int) int {
	ld := c.Leader()
	if ld < 0 {
		return -1
	}
	for _, s := range skip {
		if ld == s {
			return -1
		}
	}
	s := c.Nodes[ld].Status()
	if s.Role != "Leader" || s.Term <= minTerm || s.CommitIndex == 0 {
		return -1
	}
	var e hraft.Log
	if c.Nodes[ld].Log().GetLog(s.CommitIndex, &e) != nil || e.Term != s.Term {
		return -1
	}
	return ld
}

// maxTerm is the highest current term over the members.
func maxTerm(c *clustertest.NodeCluster) uint64 {
	var m uint64
	for _, i := range c.Running() {
		m = max(m, c.Nodes[i].Status().Term)
	}
	return m
}

// leaderWatch records the leader changes every member reports through its
// events (EventLeaderChange with a leader).
type leaderWatch struct {
	mu      sync.Mutex
	seen    map[string]bool // "term/leader"
	cancels []func()
	wg      sync.WaitGroup
}

func watchLeaders(c *clustertest.NodeCluster) *leaderWatch {
	w := &leaderWatch{seen: map[string]bool{}}
	for _, n := range c.Nodes {
		ch, cancel := n.Events(4096)
		w.cancels = append(w.cancels, cancel)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for e := range ch {
				if e.Kind == raft.EventLeaderChange && e.Leader != "" {
					w.mu.Lock()
					w.seen[fmt.Sprintf("%d/%s", e.Term, e.Leader)] = true
					w.mu.Unlock()
				}
			}
		}()
	}
	return w
}

// leaders returns the distinct (term, leader) pairs reported so far.
func (w *leaderWatch) leaders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.seen))
	for k := range w.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (w *leaderWatch) close() {
	for _, c := range w.cancels {
		c()
	}
	w.wg.Wait()
}

// votesFrom returns the RequestVote and RequestPreVote requests member a
// has sent so far.
func votesFrom(f *faultnet.Network, a hraft.ServerAddress) (votes, preVotes uint64) {
	s := f.StatsFrom(a)
	return s[faultnet.KindRequestVote].Sent, s[faultnet.KindRequestPreVote].Sent
}

// hold keeps a fault in place for d while checking every few milliseconds
// that inv holds (nil: nothing to check); it returns inv's first failure.
func hold(d time.Duration, inv func() error) error {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end.C:
			return nil
		case <-tick.C:
			if inv != nil {
				if err := inv(); err != nil {
					return err
				}
			}
		}
	}
}

// waitProgress waits until at least n more proposals were acknowledged.
func waitProgress(t *testing.T, l *ledger, n int, what string) {
	t.Helper()
	base := l.successes()
	clustertest.WaitFor(t, wait, fmt.Sprintf("%d acknowledged proposals %s", n, what), func() bool { return l.successes() >= base+n })
}

// converge stops the load, waits for every member to converge and reports
// the time as a liveness figure.
func converge(t *testing.T, c *clustertest.NodeCluster, load *loadRun, what string) uint64 {
	t.Helper()
	load.Stop()
	start := time.Now()
	c.Settle(convergeBound) // proposals given up on may still commit
	idx := c.WaitConverged(convergeBound).Digest.Index
	t.Logf("liveness: converged at index %d %v after %s (bound %v)", idx, time.Since(start).Round(time.Millisecond), what, convergeBound)
	return idx
}

// finalChecks runs every checker of docs/scenarios.md that applies to an
// in-process cluster, after the faults stopped: state digest (converge),
// acked-set (ledger), committed prefix (walcompare), applied history,
// election safety (the network's view of append-entries senders).
func finalChecks(t *testing.T, c *clustertest.NodeCluster, faults *faultnet.Network, l *ledger, load *loadRun) {
	t.Helper()
	faults.Heal()
	converge(t, c, load, "the faults stopped")
	counts := l.check(t, dumpAll(c))
	t.Logf("acked-set: %v", counts)
	if counts.OK == 0 {
		t.Errorf("no proposal was acknowledged")
	}
	rep := checkCommittedPrefix(t, c)
	t.Logf("committed prefix: %d members, compared [%d, %d], committed %d (%s), held %d, 0 committed divergences, 0 payload lost",
		len(rep.Members), rep.From, rep.To, rep.Committed, rep.CommittedBasis, rep.Held)
	checkAppliedHistory(t, c)
	checkElectionSafety(t, faults)
	terms := map[uint64]bool{}
	for _, s := range faults.AppendEntriesSenders() {
		terms[s.Term] = true
	}
	t.Logf("election safety: %d terms with append-entries, one sender each", len(terms))
	st := faults.Stats()
	kinds := make([]string, 0, len(st))
	for k := range st {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := st[k]
		t.Logf("fault stats %-15s sent %6d refused %5d lost %5d duplicated %5d", k, s.Sent, s.Refused, s.Lost, s.Duplicated)
	}
}

// docs/scenarios.md 5 (docs/failures.md §4, the failover storm). The leader is
// isolated under load; proposals on it are appended to its log (durable:
// read back from its wal) but cannot commit, and come back indeterminate.
// The majority elects a leader of a higher term and commits past that
// range. Then the former leader rejoins:
//   - its divergent tail is cut through the reconcile seam: at every index
//     of the range its log holds the live leader's entry (same term), and
//     the guard refused nothing;
//   - it follows the live leader within a bound;
//   - it starts no election: while isolated its term stayed put (pre-vote
//     does not bump it), after the heal it sends no RequestVote, its term
//     equals the leader's for the whole observation window and the leader
//     keeps its term; its pre-votes between the heal and following are
//     bounded by one round per election timeout, and none after it follows.
func TestScenarioDivergentFormerLeaderRejoins(t *testing.T) {
	seed := netSeed(t)
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 3, faults, nil)
	old := c.WaitLeader(wait)
	oldAddr := addr(c.Nodes[old])
	events, cancelEvents := c.Nodes[old].Events(4096)
	defer cancelEvents()
	watch := watchLeaders(c)
	defer watch.close()
	l := newLedger()
	load := startLoad(c, "d", 6, l)
	defer load.Stop()
	waitProgress(t, l, 30, "before the isolation")

	// The divergent tail.
	oldTerm := c.Nodes[old].Status().Term
	votes0, pre0 := votesFrom(faults, oldAddr)
	faults.Isolate(oldAddr)
	isolated := time.Now()
	var wg sync.WaitGroup
	for k := 0; k < 30; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("tail%d", k)
			_, err := c.Propose(old, key+"=v", 1500*time.Millisecond)
			l.record(key, err)
			if err == nil {
				t.Errorf("the isolated leader acknowledged %s", key)
			}
		}()
	}
	wg.Wait()
	clustertest.WaitFor(t, wait, "the isolated leader to step down", func() bool { return c.Nodes[old].Status().Role != "Leader" })
	so := c.Nodes[old].Status()
	from, tailLast := so.CommitIndex+1, so.LastIndex
	if tailLast < from {
		t.Fatalf("the isolated leader holds no uncommitted tail (commit %d, last %d)", so.CommitIndex, so.LastIndex)
	}
	oldEntries := map[uint64]hraft.Log{}
	for i := from; i <= tailLast; i++ {
		var e hraft.Log
		if err := c.Nodes[old].Log().GetLog(i, &e); err != nil {
			t.Fatalf("the isolated leader's tail entry %d is not in its log: %v", i, err)
		}
		oldEntries[i] = e
	}

	// The majority moves on, past the tail.
	var nl int
	liveness(t, "a leader of a higher term committed an entry after the leader's isolation", electBound, func() bool {
		nl = committedLeader(c, oldTerm, old)
		return nl >= 0
	})
	newTerm := c.Nodes[nl].Status().Term
	for k := 0; c.Nodes[nl].Status().CommitIndex <= tailLast; k++ {
		key := fmt.Sprintf("past%d", k)
		_, err := c.Propose(nl, key+"=v", wait)
		l.record(key, err)
		if err != nil {
			t.Fatalf("proposal on the new leader m%d: %v", nl, err)
		}
	}
	var divergent []uint64
	for i := from; i <= tailLast; i++ {
		var e hraft.Log
		if err := c.Nodes[nl].Log().GetLog(i, &e); err != nil {
			t.Fatalf("new leader's entry %d: %v", i, err)
		}
		if e.Term != oldEntries[i].Term {
			divergent = append(divergent, i)
		}
	}
	if len(divergent) == 0 {
		t.Fatalf("not the scenario: the former leader's tail [%d, %d] equals the new leader's log", from, tailLast)
	}
	// Keep it isolated a while longer: it campaigns (pre-votes) round
	// after round, and the leader's replication to it backs off.
	isoHold := 1500 * time.Millisecond
	if netLong() {
		isoHold = 8 * time.Second
	}
	_ = hold(isoHold-time.Since(isolated), nil)
	so = c.Nodes[old].Status()
	if so.Term != oldTerm {
		t.Errorf("the isolated former leader moved from term %d to %d: pre-vote should keep an isolated member's term", oldTerm, so.Term)
	}
	if v, _ := votesFrom(faults, oldAddr); v != votes0 {
		t.Errorf("the isolated former leader sent %d RequestVote while isolated", v-votes0)
	}
	t.Logf("former leader m%d (term %d) holds [%d, %d] uncommitted, %d indexes divergent from new leader m%d (term %d, commit %d), isolated for %v",
		old, oldTerm, from, tailLast, len(divergent), nl, newTerm, c.Nodes[nl].Status().CommitIndex, time.Since(isolated).Round(time.Millisecond))

	// The rejoin.
	votesHeal, preHeal := votesFrom(faults, oldAddr)
	faults.Heal()
	nlID := c.Cfgs[nl].ID
	// A bound of electBound: the new leader backs off its replication to
	// the unreachable member exponentially (hashicorp/raft: 10 ms doubling
	// per failure, uncapped up to 10 s), so the first append after the heal
	// can take a few seconds after an isolation of about two.
	follow := liveness(t, "the former leader follows the live leader, its tail replaced", electBound, func() bool {
		s := c.Nodes[old].Status()
		if s.Role != "Follower" || s.LeaderID != nlID || s.Term != c.Nodes[nl].Status().Term || s.LastIndex < tailLast {
			return false
		}
		for i := from; i <= tailLast; i++ {
			var a, b hraft.Log
			if c.Nodes[old].Log().GetLog(i, &a) != nil || c.Nodes[nl].Log().GetLog(i, &b) != nil || a.Term != b.Term {
				return false
			}
		}
		return true
	})
	votesFollow, preFollow := votesFrom(faults, oldAddr)
	window := 2 * time.Second
	if netLong() {
		window = 10 * time.Second
	}
	watched, leaderChanged := time.Now(), false
	err := hold(window, func() error {
		sl, so := c.Nodes[nl].Status(), c.Nodes[old].Status()
		switch {
		case sl.Role != "Leader" || sl.Term != newTerm:
			leaderChanged = true
			return fmt.Errorf("the live leader m%d changed: role %s term %d (was term %d)", nl, sl.Role, sl.Term, newTerm)
		case so.Term != sl.Term:
			return fmt.Errorf("the former leader's term %d differs from the leader's %d", so.Term, sl.Term)
		}
		return nil
	})
	// The live leader losing its lease under a measured stall is legal
	// (churn_test.go); the former leader then may campaign too, so its
	// vote requests after it followed count only without such a change.
	churned := false
	if err != nil && leaderChanged {
		checkChurn(t, watched, time.Now(), leaseOf(c), fmt.Sprintf("observation window after the rejoin: %v", err))
		churned = true
	} else if err != nil {
		t.Errorf("observation window after the rejoin: %v", err)
	}
	votesEnd, preEnd := votesFrom(faults, oldAddr)
	t.Logf("former leader's vote requests: before isolation %d/%d pre-votes; isolated %d/%d; heal → follow (%v) %d/%d; following %v: %d/%d",
		votes0, pre0, votesHeal-votes0, preHeal-pre0, follow.Round(time.Millisecond), votesFollow-votesHeal, preFollow-preHeal,
		window, votesEnd-votesFollow, preEnd-preFollow)
	if n := votesFollow - votesHeal; n != 0 {
		t.Errorf("the former leader sent %d RequestVote between the heal and following: it started an election against a reachable leader", n)
	}
	if n := votesEnd - votesFollow; n != 0 && !churned {
		t.Errorf("the former leader sent %d RequestVote while following a reachable leader", n)
	}
	// One pre-vote round (2 peers) per election timeout (150 ms, the
	// smallest randomized wait) while it had not heard from the leader,
	// plus one round in flight at each end.
	if n, bound := preFollow-preHeal, 2*(uint64(follow/(150*time.Millisecond))+2); n > bound {
		t.Errorf("the former leader sent %d pre-votes between the heal and following within %v (bound %d): a pre-vote storm", n, follow, bound)
	}
	// Following a live leader it has no reason to campaign; one round is
	// allowed for a heartbeat delayed past the timeout by a starved
	// scheduler (-race on two shared cores).
	if n := preEnd - preFollow; n > 2 && !churned {
		t.Errorf("the former leader sent %d pre-votes while following a reachable leader", n)
	}
	t.Logf("leaders reported: %v", watch.leaders())

	finalChecks(t, c, faults, l, load)
	checkNoGuardRefusals(t, "the former leader", events)
}

// docs/scenarios.md 6. The link between the leader and one follower flaps (up
// and down every few hundred ms, both directions) for several seconds
// under load. Each down phase outlasts the follower's heartbeat timeout, so
// it campaigns, but only with pre-votes, which the other follower refuses
// (it hears the leader) and the leader cannot receive or refuses: so no
// RequestVote from the flapping follower, no term change. The bound is one
// term change (ideally 0, the usual figure): with 150 ms timeouts, -race on
// two shared cores can starve the other follower's heartbeat handling past
// its timeout once; a storm would show as several. When the link settles
// the follower catches up within the bound.
func TestScenarioFlappingLink(t *testing.T) {
	seed := netSeed(t)
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, 3, faults, nil)
	ld := c.WaitLeader(wait)
	f := (ld + 1) % 3
	la, fa := addr(c.Nodes[ld]), addr(c.Nodes[f])
	watch := watchLeaders(c)
	defer watch.close()
	l := newLedger()
	load := startLoad(c, "f", 6, l)
	defer load.Stop()
	waitProgress(t, l, 30, "before the flapping")

	period, dur := 300*time.Millisecond, 5*time.Second
	if netLong() {
		dur = 20 * time.Second
	}
	term0 := maxTerm(c)
	votes0, pre0 := votesFrom(faults, fa)
	applied0 := c.Nodes[f].Status().AppliedIndex
	acked0 := l.successes()
	flapped := stalltest.Start().Began()
	faults.Flap(la, fa, period)
	_ = hold(dur, nil)
	faults.Flap(la, fa, 0)
	settled := time.Now()
	votes1, pre1 := votesFrom(faults, fa)
	term1 := maxTerm(c)
	fs := c.Nodes[f].Status()
	t.Logf("flapping m%d<->m%d every %v for %v: term %d → %d, follower applied %d → %d, %d acknowledged meanwhile; follower sent %d RequestVote, %d pre-votes",
		ld, f, period, dur, term0, term1, applied0, fs.AppliedIndex, l.successes()-acked0, votes1-votes0, pre1-pre0)
	if n := term1 - term0; n > 1 {
		checkChurn(t, flapped, settled, leaseOf(c), fmt.Sprintf("%d term changes during the flapping (bound 1): leadership churn", n))
	}
	// A RequestVote bumps the sender's term, so it is bounded by the term
	// changes: one election round (2 peers) at most.
	if n := votes1 - votes0; n > 2*(term1-term0) {
		t.Errorf("the flapping follower sent %d RequestVote with %d term changes: pre-vote did not hold it back", n, term1-term0)
	}
	// At most one pre-vote round (2 peers) per election timeout.
	if n, bound := pre1-pre0, 2*uint64(dur/(150*time.Millisecond)+1); n > bound {
		t.Errorf("the flapping follower sent %d pre-votes in %v (bound %d)", n, dur, bound)
	}
	if l.successes() == acked0 {
		t.Errorf("nothing acknowledged during the flapping")
	}

	// The link settled: the follower catches up with the leader's commit
	// index at the moment it settled (the load keeps running).
	nl := c.WaitLeader(wait)
	target := c.Nodes[nl].Status().CommitIndex
	liveness(t, "the follower caught up after the link settled", convergeBound, func() bool {
		return c.Nodes[f].Status().AppliedIndex >= target
	})
	t.Logf("settled %v ago; leaders reported: %v", time.Since(settled).Round(time.Millisecond), watch.leaders())
	finalChecks(t, c, faults, l, load)
}

// docs/scenarios.md 7. Rounds of partitions under load, each healed and
// converged before the next:
//   - the leader isolated: the others elect a leader of a higher term that
//     commits, the load goes on there; the old leader rejoins as follower;
//   - a minority isolated (one follower of 3; two of 5, still connected to
//     each other): the majority keeps committing under its leader, and the
//     minority, held back by pre-vote, sends no RequestVote;
//   - asymmetric: one member can send but not receive (every link into it
//     cut). A follower so cut campaigns with pre-votes that reach the others
//     but whose answers never reach it: no RequestVote, the leader stays. A
//     leader so cut is still heard by the followers, whose answers never
//     reach it; it loses its lease and steps down, the others elect a
//     leader of a higher term; it sends no RequestVote either. The rounds
//     alternate between a follower and the leader.
//
// After each heal every member converges (same log, commit index and
// digest) within the bound; at the end all checkers run.
func TestScenarioPartitions(t *testing.T) {
	rounds := 2
	if netLong() {
		rounds = 5
	}
	t.Run("3", func(t *testing.T) { partitionRounds(t, 3, rounds) })
	t.Run("5", func(t *testing.T) {
		n := 1
		if netLong() {
			n = rounds
		}
		partitionRounds(t, 5, n)
	})
}

func partitionRounds(t *testing.T, size, rounds int) {
	seed := netSeed(t)
	faults := faultnet.New(seed)
	c := clustertest.StartNodes(t, size, faults, nil)
	c.WaitLeader(wait)
	watch := watchLeaders(c)
	defer watch.close()
	l := newLedger()
	holdFor := time.Second
	if netLong() {
		holdFor = 3 * time.Second
	}
	phase := 0
	load := startLoad(c, "p0-", 6, l)
	defer func() { load.Stop() }()
	// heal ends a phase: heal, converge, check terms, restart the load.
	heal := func(what string) {
		t.Helper()
		faults.Heal()
		converge(t, c, load, "healing "+what)
		ld := c.WaitLeader(wait)
		lt := c.Nodes[ld].Status().Term
		for _, i := range c.Running() {
			if s := c.Nodes[i].Status(); s.Term != lt {
				t.Errorf("after healing %s: m%d in term %d, leader m%d in term %d", what, i, s.Term, ld, lt)
			}
		}
		phase++
		load = startLoad(c, fmt.Sprintf("p%d-", phase), 6, l)
	}
	votes := func(members []int) uint64 {
		var n uint64
		for _, i := range members {
			v, _ := votesFrom(faults, addr(c.Nodes[i]))
			n += v
		}
		return n
	}
	for round := 0; round < rounds; round++ {
		// The leader isolated.
		waitProgress(t, l, 10, "before isolating the leader")
		ld := c.WaitLeader(wait)
		term := c.Nodes[ld].Status().Term
		faults.Isolate(addr(c.Nodes[ld]))
		var nl int
		liveness(t, fmt.Sprintf("round %d: a new leader committed after isolating leader m%d (term %d)", round, ld, term), electBound, func() bool {
			nl = committedLeader(c, term, ld)
			return nl >= 0
		})
		waitProgress(t, l, 10, "with the leader isolated")
		t.Logf("round %d: leader m%d isolated: m%d leads in term %d", round, ld, nl, c.Nodes[nl].Status().Term)
		heal("the leader's isolation")

		// A minority isolated, in touch with itself.
		ld = c.WaitLeader(wait)
		term = c.Nodes[ld].Status().Term
		var minority []int
		for k := 1; len(minority) < (size-1)/2; k++ {
			minority = append(minority, (ld+k)%size)
		}
		in := map[int]bool{}
		for _, i := range minority {
			in[i] = true
		}
		for _, i := range minority {
			for j := range c.Nodes {
				if !in[j] {
					faults.Partition(addr(c.Nodes[i]), addr(c.Nodes[j]))
				}
			}
		}
		v0, acked := votes(minority), l.successes()
		holdLeader(t, c, ld, term, holdFor, fmt.Sprintf("round %d, minority %v isolated", round, minority))
		if n := votes(minority) - v0; n != 0 {
			t.Errorf("round %d: the isolated minority %v sent %d RequestVote", round, minority, n)
		}
		if l.successes() == acked {
			t.Errorf("round %d: nothing acknowledged with the minority %v isolated", round, minority)
		}
		t.Logf("round %d: minority %v isolated for %v: %d acknowledged meanwhile, leader m%d kept term %d", round, minority, holdFor, l.successes()-acked, ld, term)
		heal("the minority's isolation")

		// Asymmetric: x sends, receives nothing.
		ld = c.WaitLeader(wait)
		term = c.Nodes[ld].Status().Term
		x, who := (ld+1)%size, "follower"
		if round%2 == 1 {
			x, who = ld, "leader"
		}
		for i := range c.Nodes {
			if i != x {
				faults.Cut(addr(c.Nodes[i]), addr(c.Nodes[x]))
			}
		}
		v0, acked = votes([]int{x}), l.successes()
		if x == ld {
			liveness(t, fmt.Sprintf("round %d: a new leader committed after cutting every link into leader m%d (term %d)", round, ld, term), electBound, func() bool {
				nl = committedLeader(c, term, ld)
				return nl >= 0
			})
			waitProgress(t, l, 10, "with the old leader unable to receive")
			_ = hold(holdFor/2, nil)
		} else {
			holdLeader(t, c, ld, term, holdFor, fmt.Sprintf("round %d, follower m%d unable to receive", round, x))
		}
		if n := votes([]int{x}) - v0; n != 0 {
			t.Errorf("round %d: %s m%d, unable to receive, sent %d RequestVote", round, who, x, n)
		}
		if l.successes() == acked {
			t.Errorf("round %d: nothing acknowledged with %s m%d unable to receive", round, who, x)
		}
		t.Logf("round %d: %s m%d unable to receive: %d acknowledged meanwhile, max term %d (was %d)", round, who, x, l.successes()-acked, maxTerm(c), term)
		heal("the asymmetric cut")
	}
	t.Logf("leaders reported: %v", watch.leaders())
	finalChecks(t, c, faults, l, load)
}

// docs/scenarios.md 8. Message delay, drop and duplication during load, one
// cluster per fault mix: delay + duplication, delay + drop, all three. The
// FaultNetwork cannot aim these at a subset of links (its rates apply to
// every link, requests and responses alike), so they apply to all links at
// moderate rates: 2 ms + [0, 8 ms) of delay, 5% (3% combined) drops, 10%
// duplicates.
//
// Under duplication the load goes to the leader only. The FaultNetwork
// also duplicates the member RPCs (Call), and a duplicated jr.propose
// runs the forwarded proposal twice: the forward path is at-most-once only
// because the real transport is (one frame per call, no retry after the
// write), and a network that re-delivers a request is not one jobraft
// runs on. Raft's own messages (append-entries with heartbeats and
// pipelining, votes, pre-votes) are duplicated and must be harmless.
// Under drops alone the load goes to every member, forwarding included.
//
// Each mix must keep committing: the acknowledged count grows in each half
// of the window. At the end all checkers run.
//
// The mixes with drops reproduce hashicorp/raft #612, the pipeline
// deadlock, without seam.DrainPipelines: a dropped response to a
// pipelined append reaches raft as a failed response (Success false) on a
// healthy connection; pipelineDecode returns, nothing reads the pipeline's
// responses any more, and the next pipelined send blocks for good on the
// unbuffered in-progress channel (MaxRPCsInFlight 2): replication to that
// follower stops for good and Close hangs (seed 1796042051446064366: leader
// m2 term 2 last 1481 commit 1459, followers at 1346 and 1465, 0
// acknowledged in 3 s; seed 1796042276522019093: follower m0 stuck at 317
// while the others went on to 847). Outside tests the same Success=false
// comes from a follower whose log store refuses an append (the wal guard, a
// write or fsync error, docs/scenarios.md 11 and 12). The node drains its
// pipelines, and these mixes run by default.
func TestScenarioDelayDropDuplicate(t *testing.T) {
	mixes := []struct {
		name       string
		drop, dup  float64
		leaderOnly bool
	}{
		{"delay+duplicate", 0, 0.10, true},
		{"delay+drop", 0.05, 0, false},
		{"delay+drop+duplicate", 0.03, 0.10, true},
	}
	for _, mx := range mixes {
		t.Run(mx.name, func(t *testing.T) {
			delayDropDuplicate(t, mx.drop, mx.dup, mx.leaderOnly)
		})
	}
}

func delayDropDuplicate(t *testing.T, drop, dup float64, leaderOnly bool) {
	seed := netSeed(t)
	faults := faultnet.New(seed)
	size, window := 3, 4*time.Second
	if netLong() {
		size, window = 5, 15*time.Second
	}
	c := clustertest.StartNodes(t, size, faults, nil)
	c.WaitLeader(wait)
	watch := watchLeaders(c)
	defer watch.close()
	l := newLedger()
	var load *loadRun
	if leaderOnly {
		load = startLeaderLoad(c, "x", 6, l)
	} else {
		load = startLoad(c, "x", 6, l)
	}
	defer load.Stop()
	waitProgress(t, l, 30, "before the faults")

	faults.SetDelay(2*time.Millisecond, 8*time.Millisecond)
	faults.SetDrop(drop)
	faults.SetDuplicate(dup)
	before := faults.Stats()
	term0, acked0 := maxTerm(c), l.successes()
	st1 := holdRunning(window / 2) // each half is a liveness window: stalls extend it
	acked1 := l.successes()
	st2 := holdRunning(window - window/2)
	acked2, term1 := l.successes(), maxTerm(c)
	after := faults.Stats()
	d := func(kind string) FaultDelta { return faultDelta(before[kind], after[kind]) }
	t.Logf("drop %.2f, dup %.2f, delay 2ms+[0,8ms) for %v: acknowledged %d + %d, term %d → %d; AppendEntries %v; pre-votes %v; votes %v; calls %v",
		drop, dup, window, acked1-acked0, acked2-acked1, term0, term1,
		d(faultnet.KindAppendEntries), d(faultnet.KindRequestPreVote), d(faultnet.KindRequestVote), d(faultnet.KindCall))
	if acked1 == acked0 || acked2 == acked1 {
		t.Errorf("no progress in a half of the fault window (acknowledged %d, then %d; halves extended by %v, then %v)", acked1-acked0, acked2-acked1, st1, st2)
	}
	if dup > 0 && d(faultnet.KindAppendEntries).Duplicated == 0 {
		t.Errorf("no append-entries was duplicated")
	}
	if drop > 0 && d(faultnet.KindAppendEntries).Refused+d(faultnet.KindAppendEntries).Lost == 0 {
		t.Errorf("no append-entries was dropped")
	}
	t.Logf("leaders reported: %v", watch.leaders())
	finalChecks(t, c, faults, l, load)
}

// FaultDelta is the change of one kind's FaultCounts over a window.
type FaultDelta faultnet.Counts

func faultDelta(a, b faultnet.Counts) FaultDelta {
	return FaultDelta{Sent: b.Sent - a.Sent, Refused: b.Refused - a.Refused, Lost: b.Lost - a.Lost, Duplicated: b.Duplicated - a.Duplicated}
}

func (d FaultDelta) String() string {
	return fmt.Sprintf("sent %d refused %d lost %d dup %d", d.Sent, d.Refused, d.Lost, d.Duplicated)
}
