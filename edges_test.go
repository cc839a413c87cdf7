package jobraft_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/ctltest"
)

// A worker configuration that cannot work (a queue with concurrency 0 or
// below) is refused with ErrInvalidConfig at once: Run claims nothing and
// the job waiting in the queue stays pending.
func TestRunRefusesInvalidConcurrency(t *testing.T) {
	c := ctltest.Start(t, 1, nil)
	c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	c := ctltest.Start(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	ctltest.WaitFor(t, wait, "the handled job to succeed", func() bool {
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
	const pollWait = 300 * time.Millisecond
	c := ctltest.Start(t, 3, func(_ int, cfg *jobraft.Config) { cfg.ClaimPollInterval = 100 * time.Millisecond })
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, 2*wait)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	handled := make(chan string, 16)
	for i := range c.Ctls {
		go c.Ctls[i].Run(rctx, jobraft.WorkerConfig{Queues: map[string]int{"idle": 2, "idle2": 1}, PollWait: pollWait,
			Handlers: map[string]jobraft.Handler{"k": func(_ context.Context, j jobraft.Job) ([]byte, error) {
				handled <- j.ID
				return nil, nil
			}}})
	}
	// Every member has applied the leader's whole log before the window.
	ctltest.WaitFor(t, wait, "members to apply the leader's log", func() bool {
		lead := c.Ctls[l].Node().Status()
		for i := range c.Ctls {
			if s := c.Ctls[i].Node().Status(); s.AppliedIndex != lead.LastIndex {
				return false
			}
		}
		return true
	})
	// The window: 20 heartbeat intervals and at least 3 s, over which
	// every worker long-polls several times (pollWait) and rechecks every
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

// Every other configuration Run cannot work with is refused the same way,
// before any claim.
func TestRunRefusesInvalidConfig(t *testing.T) {
	c := ctltest.Start(t, 1, nil)
	c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	c := ctltest.Start(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	if after := termAndLast(c); after[1] != before[1] && after[0] == before[0] {
		t.Fatalf("a long poll on a paused queue wrote to the log: last index %d -> %d in term %d", before[1], after[1], after[0])
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
	c := ctltest.Start(t, 3, func(_ int, cfg *jobraft.Config) {
		cfg.SweepInterval = 50 * time.Millisecond
		cfg.RetainFor = retain
	})
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	ctltest.WaitFor(t, wait, "the finished job to be swept", func() bool {
		_, err := c.Ctls[l].Get(ctx, j.ID, jobraft.Local)
		return errors.Is(err, jobraft.ErrNotFound)
	})
}

// termAndLast returns the highest term and the highest last index of the
// running members.
func termAndLast(c *ctltest.Cluster) [2]uint64 {
	var out [2]uint64
	for _, ctl := range c.Ctls {
		if ctl != nil {
			st := ctl.Node().Status()
			out[0], out[1] = max(out[0], st.Term), max(out[1], st.LastIndex)
		}
	}
	return out
}

// assertQuietLog fails the test if a member's last index moves within
// window (polled; a negative check over a fixed window). A new leader's
// first entry is not the writes this checks for: when the term changed
// too, the check goes on from the new index, and with restart the window
// starts again (at most 3 elections).
func assertQuietLog(t *testing.T, c *ctltest.Cluster, window time.Duration, restart bool) {
	t.Helper()
	base := termAndLast(c)
	end := time.Now().Add(window)
	for restarts := 0; time.Now().Before(end); {
		now := termAndLast(c)
		switch {
		case now == base:
		case now[0] != base[0] && restarts < 3:
			t.Logf("term %d -> %d (an election under load): checking on from index %d", base[0], now[0], now[1])
			restarts++
			base = now
			if restart {
				end = time.Now().Add(window)
			}
		default:
			t.Fatalf("the log moved: last index %d -> %d (term %d -> %d), %v into a quiet window of %v",
				base[1], now[1], base[0], now[0], window-time.Until(end), window)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a negative check over a fixed window
	}
}
