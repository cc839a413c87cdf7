package jobraft_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A worker configuration that cannot work (a queue with concurrency 0 or
// below) is refused with ErrInvalidConfig at once: Run claims nothing and
// the job waiting in the queue stays pending.
func TestRunRefusesInvalidConcurrency(t *testing.T) {
	c := clustertest.StartCtls(t, 1, nil)
	c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	j, err := c.Ctls[0].Submit(ctx, jobraft.SubmitRequest{Queue: "z", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, jobraft.Job) ([]byte, error) { return nil, nil }
	for _, n := range []int{0, -1} {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		err := c.Ctls[0].Run(rctx, jobraft.WorkerConfig{Queues: map[string]int{"z": n}, Handlers: map[string]jobraft.Handler{"k": h}})
		cancel()
		if !errors.Is(err, jobraft.ErrInvalidConfig) {
			t.Fatalf("Run with concurrency %d: %v after %v, want ErrInvalidConfig", n, err, time.Since(start))
		}
	}
	got, err := c.Ctls[0].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StatePending || got.Attempts != 0 {
		t.Fatalf("job after refused Runs: %v %+v", err, got)
	}
}

// A job of a kind the worker has no handler for is never claimed by it
// (the claim filters by the worker's kinds): it stays pending, untouched,
// for a worker that handles it, while the worker's own kinds are worked
// on, including a job submitted after it.
func TestRunLeavesUnhandledKindsPending(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	other, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "mixed", Kind: "other"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "mixed", Kind: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	w := (l + 1) % 3
	go func() {
		done <- c.Ctls[w].Run(rctx, jobraft.WorkerConfig{Queues: map[string]int{"mixed": 1}, PollWait: time.Second,
			Handlers: map[string]jobraft.Handler{"mine": func(context.Context, jobraft.Job) ([]byte, error) { return []byte("ok"), nil }}})
	}()
	clustertest.WaitFor(t, wait, "the handled job to succeed", func() bool {
		j, err := c.Ctls[w].Get(ctx, mine.ID, jobraft.Local)
		return err == nil && j.State == jobraft.StateSucceeded
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := c.Ctls[l].Get(ctx, other.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StatePending || got.Attempts != 0 || got.LastError != "" {
		t.Fatalf("unhandled job: %v %+v, want pending and never claimed", err, got)
	}
}

// An idle cluster writes nothing: with workers long-polling on every
// member, no entry reaches the log while there is nothing to claim (a claim
// is proposed only when this member's applied state shows something
// claimable). A job submitted afterwards is still claimed promptly.
func TestIdleWorkersWriteNothing(t *testing.T) {
	c := clustertest.StartCtls(t, 3, func(_ int, cfg *jobraft.Config) { cfg.ClaimPollInterval = 100 * time.Millisecond })
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 2*wait)
	handled := runIdleWorkers(t, ctx, c, l)
	// The window: 20 heartbeat intervals and at least 3 s, over which
	// every worker long-polls several times and rechecks every
	// ClaimPollInterval.
	assertQuietLog(t, c, max(20*c.Cfgs[0].HeartbeatTimeout, 3*time.Second), true)
	start := time.Now()
	j, err := c.Ctls[(l+1)%3].Submit(ctx, jobraft.SubmitRequest{Queue: "idle2", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-handled:
		if id != j.ID {
			t.Fatalf("handled %s, want %s", id, j.ID)
		}
		t.Logf("job handled %v after its submit was sent", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("the job submitted after the idle window was not claimed within 10s")
	}
}

// An election in an idle cluster writes only raft's own entries of the new
// leader (its no-op and barriers, see leaderEntries): no command, neither a
// duty of the new leader (an ExpireCmd while no lease is due, a sweep) nor
// a claim of a worker long-polling on any member. assertQuietLog lets
// exactly these through when an election lands in its window.
func TestIdleElectionWritesNoCommand(t *testing.T) {
	c := clustertest.StartCtls(t, 3, func(_ int, cfg *jobraft.Config) { cfg.ClaimPollInterval = 100 * time.Millisecond })
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 2*wait)
	runIdleWorkers(t, ctx, c, l)
	base := termAndLast(c)
	if err := c.Ctls[l].Node().TransferLeadership(ctx, c.Cfgs[(l+1)%3].ID); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, wait, "a leader of a later term", func() bool {
		nl := c.Leader()
		return nl >= 0 && c.Ctls[nl].Node().Status().Term > base[0]
	})
	c.WaitLeader(wait) // its barrier is committed
	// The new leader's duties tick every ExpireInterval and every worker
	// rechecks every ClaimPollInterval: many times over this window.
	assertQuietLog(t, c, max(10*c.Cfgs[0].ExpireInterval, time.Second), false)
	seen, newTerm, err := leaderEntries(c, base)
	if err != nil {
		t.Fatal(err)
	}
	if newTerm <= base[0] {
		t.Fatalf("no no-op of a leader after term %d past index %d: %s", base[0], base[1], seen)
	}
	t.Logf("term %d, last index %d; after the election: %s", base[0], base[1], seen)
}

// runIdleWorkers runs a worker on every member of c (queues "idle" and
// "idle2", kind "k", long-polling) until ctx ends, and returns once every
// member has applied leader l's whole log. The returned channel receives
// the ID of every job a worker handled.
func runIdleWorkers(t *testing.T, ctx context.Context, c *clustertest.CtlCluster, l int) <-chan string {
	t.Helper()
	handled := make(chan string, 16)
	for i := range c.Ctls {
		go c.Ctls[i].Run(ctx, jobraft.WorkerConfig{Queues: map[string]int{"idle": 2, "idle2": 1}, PollWait: 300 * time.Millisecond,
			Handlers: map[string]jobraft.Handler{"k": func(_ context.Context, j jobraft.Job) ([]byte, error) {
				handled <- j.ID
				return nil, nil
			}}})
	}
	clustertest.WaitFor(t, wait, "members to apply the leader's log", func() bool {
		lead := c.Ctls[l].Node().Status()
		for i := range c.Ctls {
			if s := c.Ctls[i].Node().Status(); s.AppliedIndex != lead.LastIndex {
				return false
			}
		}
		return true
	})
	return handled
}

// Every other configuration Run cannot work with is refused the same way,
// before any claim.
func TestRunRefusesInvalidConfig(t *testing.T) {
	c := clustertest.StartCtls(t, 1, nil)
	c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	h := func(context.Context, jobraft.Job) ([]byte, error) { return nil, nil }
	many := map[string]jobraft.Handler{}
	for i := range 65 {
		many[fmt.Sprint("k", i)] = h
	}
	cases := []struct {
		name string
		wc   jobraft.WorkerConfig
	}{
		{"no queues", jobraft.WorkerConfig{Handlers: map[string]jobraft.Handler{"k": h}}},
		{"no handlers", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}}},
		{"nil handler", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Handlers: map[string]jobraft.Handler{"k": nil}}},
		{"too many kinds", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Handlers: many}},
		{"empty queue name", jobraft.WorkerConfig{Queues: map[string]int{"": 1}, Default: h}},
		{"empty kind", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Handlers: map[string]jobraft.Handler{"": h}}},
		{"worker name too long", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Default: h, Worker: strings.Repeat("w", 129)}},
		{"lease TTL too long", jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Default: h, LeaseTTL: 25 * time.Hour}},
	}
	before := c.Ctls[0].Node().Status().LastIndex
	for _, tc := range cases {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.Ctls[0].Run(rctx, tc.wc)
		cancel()
		if !errors.Is(err, jobraft.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if after := c.Ctls[0].Node().Status().LastIndex; after != before {
		t.Fatalf("refused Runs wrote to the log: last index %d -> %d", before, after)
	}
	// Too many kinds is fine with a Default handler: it claims every kind.
	many2 := jobraft.WorkerConfig{Queues: map[string]int{"q": 1}, Handlers: many, Default: h}
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Ctls[0].Run(rctx, many2); err != nil {
		t.Fatalf("65 kinds with a Default: %v", err)
	}
}

// A long-polling claim whose queues are all paused proposes nothing while
// it waits and answers ErrQueuePaused when the wait ends; a resume applied
// meanwhile wakes it and it claims the job.
func TestLongPollOnPausedQueue(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	f := (l + 1) % 3
	if err := c.Ctls[l].Pause(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "p", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// The follower has applied the pause and the submit.
	if _, err := c.Ctls[f].Get(ctx, j.ID, jobraft.Linearizable); err != nil {
		t.Fatal(err)
	}
	before := termAndLast(c)
	start := time.Now()
	ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"p"}, Worker: "w", Wait: 500 * time.Millisecond})
	if !errors.Is(err, jobraft.ErrQueuePaused) || !errors.Is(err, fsm.ErrQueuePaused) || len(ls) != 0 {
		t.Fatalf("long poll on a paused queue: %d leases, %v", len(ls), err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("answered after %v, before its wait ended", waited)
	}
	if _, _, err := leaderEntries(c, before); err != nil {
		t.Fatalf("a long poll on a paused queue wrote to the log: %v", err)
	}
	got := make(chan []*jobraft.Lease, 1)
	go func() {
		ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"p"}, Worker: "w", Wait: wait})
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	if err := c.Ctls[l].Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if ls := <-got; len(ls) != 1 || ls[0].Job.ID != j.ID {
		t.Fatalf("claim after resume: %d leases", len(ls))
	}
}

// The leader proposes a retention sweep only when one would remove a job:
// finished jobs younger than RetainFor write nothing, however often the
// sweep interval comes round; once one is old enough it is swept.
func TestIdleLeaderSweepsOnlyWhatIsDue(t *testing.T) {
	const retain = 3 * time.Second
	c := clustertest.StartCtls(t, 3, func(_ int, cfg *jobraft.Config) {
		cfg.SweepInterval = 50 * time.Millisecond
		cfg.RetainFor = retain
	})
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "s", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctls[l].Cancel(ctx, j.ID, "finished"); err != nil {
		t.Fatal(err)
	}
	finished := time.Now()
	// Until the job is RetainFor old (less a margin for the loaded
	// machine), nothing is sweepable: the log must not move.
	assertQuietLog(t, c, retain-time.Second-time.Since(finished), false)
	clustertest.WaitFor(t, wait, "the finished job to be swept", func() bool {
		_, err := c.Ctls[l].Get(ctx, j.ID, jobraft.Local)
		return errors.Is(err, jobraft.ErrNotFound)
	})
}

// termAndLast returns the highest term and the highest last index of the
// running members.
func termAndLast(c *clustertest.CtlCluster) [2]uint64 {
	var out [2]uint64
	for _, ctl := range c.Ctls {
		if ctl != nil {
			st := ctl.Node().Status()
			out[0], out[1] = max(out[0], st.Term), max(out[1], st.LastIndex)
		}
	}
	return out
}

// leaderEntries checks every entry that a running member holds past
// base (termAndLast when a quiet stretch began) with leaderRun and
// describes them, or says which member holds a write. newTerm is the
// highest term whose no-op is past base (0: none).
func leaderEntries(c *clustertest.CtlCluster, base [2]uint64) (seen string, newTerm uint64, err error) {
	var all []string
	for _, ctl := range c.Ctls {
		if ctl == nil {
			continue
		}
		n := ctl.Node()
		last := n.Status().LastIndex
		entries, term, err := leaderRun(n.Log().GetLog, base[1], last)
		if err != nil {
			return "", 0, fmt.Errorf("%s, past last index %d (term %d): %w", n.ID(), base[1], base[0], err)
		}
		if len(entries) > 0 {
			all = append(all, n.ID()+": "+strings.Join(entries, ", "))
		}
		newTerm = max(newTerm, term)
	}
	if len(all) == 0 {
		return "nothing", 0, nil
	}
	return strings.Join(all, "; "), newTerm, nil
}

// leaderRun checks the entries (from, last] of a log read by get and
// describes them, or names the first one that is a write. Only a new
// leader's own entries are not (an election: a member shows its new term
// as a candidate, before it wins and writes them): raft's no-op, the first
// entry of the leader's term (hashicorp/raft writes it on taking office),
// then barriers only. The node commits a barrier when it takes office
// (raft/observe.go), and a linearizable read that reaches the leader
// before that one is committed commits another (raft/read.go; followers'
// workers read through the leader every claim poll). Neither reaches the
// state machine. A term's barriers may go on past from when its no-op is
// at or before from (the term began just before). Any other entry is a
// write: a command (a claim, a duty such as ExpireCmd or SweepCmd), a
// configuration change, a barrier after its term's first command, a no-op
// not of a later term than the entry before it. newTerm is the highest
// term whose no-op is past from (0: none).
func leaderRun(get func(uint64, *hraft.Log) error, from, last uint64) (entries []string, newTerm uint64, err error) {
	run, prev := openRun(get, from)
	for i := from + 1; i <= last; i++ {
		var e hraft.Log
		if err := get(i, &e); err != nil {
			return nil, 0, fmt.Errorf("entry %d (last index %d): %w", i, last, err)
		}
		entries = append(entries, fmt.Sprintf("%d (term %d, %v)", e.Index, e.Term, e.Type))
		switch {
		case e.Type == hraft.LogNoop && e.Term > prev: // a new leader's first entry
			run, newTerm = e.Term, max(newTerm, e.Term)
		case e.Type == hraft.LogBarrier && e.Term == run:
		default:
			return nil, 0, fmt.Errorf("entry %d (term %d, %v) is not a new leader's no-op or barrier: %s",
				e.Index, e.Term, e.Type, strings.Join(entries, ", "))
		}
		prev = e.Term
	}
	return entries, newTerm, nil
}

// openRun returns term, entry i's term in the log read by get, and run:
// term when the entries of term up to i are its no-op and barriers only
// (its leader has written nothing else yet), else 0.
func openRun(get func(uint64, *hraft.Log) error, i uint64) (run, term uint64) {
	for j := i; j > 0; j-- {
		var e hraft.Log
		if get(j, &e) != nil {
			return 0, term // compacted, or no entry i: no run open
		}
		if j == i {
			term = e.Term
		}
		switch {
		case e.Term != term:
			return 0, term
		case e.Type == hraft.LogNoop:
			return term, term
		case e.Type != hraft.LogBarrier:
			return 0, term
		}
	}
	return 0, term
}

// assertQuietLog fails the test if a member's log gains an entry within
// window (polled; a negative check over a fixed window). An election
// within it is not a write: a new leader's own entries are let through
// (leaderEntries), and with restart the window starts again at each new
// term (at most 3 elections).
func assertQuietLog(t *testing.T, c *clustertest.CtlCluster, window time.Duration, restart bool) {
	t.Helper()
	base := termAndLast(c)
	term, seen := base[0], "nothing"
	end := time.Now().Add(window)
	for elections := 0; time.Now().Before(end); {
		now := termAndLast(c)
		if now[0] != term {
			if elections++; elections > 3 {
				t.Fatalf("term %d -> %d: a 4th election in a quiet window of %v", base[0], now[0], window)
			}
			t.Logf("term %d -> %d (an election under load), %v into a quiet window of %v", term, now[0], window-time.Until(end), window)
			term = now[0]
			if restart {
				end = time.Now().Add(window)
			}
		}
		if now != base {
			got, _, err := leaderEntries(c, base)
			if err != nil {
				t.Fatalf("the log moved: last index %d -> %d (term %d -> %d), %v into a quiet window of %v: %v",
					base[1], now[1], base[0], now[0], window-time.Until(end), window, err)
			}
			if got != seen {
				t.Logf("let through past index %d: %s", base[1], got)
				seen = got
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a negative check over a fixed window
	}
}

// leaderRun lets through exactly a new leader's own entries past a quiet
// stretch's start.
func TestLeaderRun(t *testing.T) {
	const (
		cfg  = hraft.LogConfiguration
		noop = hraft.LogNoop
		bar  = hraft.LogBarrier
		cmd  = hraft.LogCommand
	)
	type ent struct {
		term uint64
		typ  hraft.LogType
	}
	for _, tc := range []struct {
		name    string
		log     []ent // entries 1, 2, ...
		from    uint64
		newTerm uint64
		write   uint64 // the entry refused (0: none)
	}{
		{"nothing past from", []ent{{1, cfg}, {2, noop}, {2, bar}}, 3, 0, 0},
		{"an election", []ent{{1, cfg}, {2, noop}, {2, bar}, {3, noop}, {3, bar}, {3, bar}}, 3, 3, 0},
		{"two elections", []ent{{1, cfg}, {2, noop}, {2, bar}, {3, noop}, {4, noop}, {4, bar}}, 3, 4, 0},
		{"the term began at from", []ent{{1, cfg}, {2, noop}, {2, bar}, {2, bar}}, 2, 0, 0},
		{"the term began before from", []ent{{1, cfg}, {2, noop}, {2, bar}, {2, bar}}, 3, 0, 0},
		{"a command", []ent{{1, cfg}, {2, noop}, {2, bar}, {2, cmd}}, 3, 0, 4},
		{"a new leader's command", []ent{{1, cfg}, {2, noop}, {2, bar}, {3, noop}, {3, bar}, {3, cmd}}, 3, 0, 6},
		{"a barrier after a command", []ent{{1, cfg}, {2, noop}, {2, cmd}, {2, bar}}, 3, 0, 4},
		{"a barrier of a term without its no-op", []ent{{1, cfg}, {2, noop}, {2, bar}, {3, bar}}, 3, 0, 4},
		{"a no-op of the same term", []ent{{1, cfg}, {2, noop}, {2, noop}}, 2, 0, 3},
		{"a configuration change", []ent{{1, cfg}, {2, noop}, {2, bar}, {3, noop}, {3, cfg}}, 3, 0, 5},
	} {
		get := func(i uint64, e *hraft.Log) error {
			if i == 0 || i > uint64(len(tc.log)) {
				return hraft.ErrLogNotFound
			}
			*e = hraft.Log{Index: i, Term: tc.log[i-1].term, Type: tc.log[i-1].typ}
			return nil
		}
		entries, newTerm, err := leaderRun(get, tc.from, uint64(len(tc.log)))
		switch {
		case tc.write == 0 && (err != nil || newTerm != tc.newTerm):
			t.Errorf("%s: %v, new term %d (want %d); %v", tc.name, err, newTerm, tc.newTerm, entries)
		case tc.write != 0 && (err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("entry %d ", tc.write))):
			t.Errorf("%s: %v, want entry %d refused", tc.name, err, tc.write)
		}
	}
}
