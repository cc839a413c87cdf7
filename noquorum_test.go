package jobraft_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
)

// TestNoQuorumEndsWithinLeaderWait: with two of three members stopped,
// every operation on the survivor that needs a leader ends within
// Config.LeaderWait (plus slack for the reachability round and a loaded
// machine), although its context allows a minute: Submit with
// ErrNotSubmitted, Cancel and Pause with ErrNotApplied, Get and Stats with
// their read error, each matching ErrNoLeader, whose *raft.NoLeaderError
// says 1 of 3 voters is reachable. Nothing was applied: once the others
// are back, the job refused is not found, and the same calls succeed.
func TestNoQuorumEndsWithinLeaderWait(t *testing.T) {
	const leaderWait = 2 * time.Second
	c := clustertest.StartCtls(t, 3, func(_ int, cfg *jobraft.Config) { cfg.LeaderWait = leaderWait })
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: "before", Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// Stop the leader and one follower: the survivor is a follower that
	// saw a leader, then none.
	survivor := (l + 1) % 3
	for i := range c.Ctls {
		if i != survivor {
			c.StopMember(i)
		}
	}
	s := c.Ctls[survivor]

	// slack: the reachability round (at most a second) and a loaded
	// machine; the context would allow a minute.
	const bound = leaderWait + 3*time.Second
	timed := func(name string, call func(ctx context.Context) error) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		t.Logf("%s without a quorum: %v after %v", name, err, took.Round(time.Millisecond))
		if took > bound {
			t.Errorf("%s took %v, want at most LeaderWait %v + slack (%v)", name, took, leaderWait, bound)
		}
		if !errors.Is(err, jobraft.ErrNoLeader) || !errors.Is(err, raft.ErrNoLeader) {
			t.Errorf("%s: %v, want ErrNoLeader", name, err)
		}
		var nl *raft.NoLeaderError
		if !errors.As(err, &nl) {
			t.Errorf("%s: %v carries no *raft.NoLeaderError", name, err)
		} else if len(nl.Voters) != 3 || len(nl.Reachable) != 1 || nl.Reachable[0] != c.Cfgs[survivor].ID {
			t.Errorf("%s: voters %v, reachable %v; want 3 voters, only %s reachable", name, nl.Voters, nl.Reachable, c.Cfgs[survivor].ID)
		}
		return err
	}
	var refused string
	err = timed("Submit", func(ctx context.Context) error {
		_, err := s.Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k"})
		var se *jobraft.SubmitError
		if errors.As(err, &se) {
			refused = se.ID
		}
		return err
	})
	if !errors.Is(err, jobraft.ErrNotSubmitted) || errors.Is(err, jobraft.ErrMayExist) {
		t.Errorf("Submit: %v, want ErrNotSubmitted only", err)
	}
	err = timed("Cancel", func(ctx context.Context) error { _, err := s.Cancel(ctx, j.ID, "r"); return err })
	if !errors.Is(err, jobraft.ErrNotApplied) {
		t.Errorf("Cancel: %v, want ErrNotApplied", err)
	}
	err = timed("Pause", func(ctx context.Context) error { return s.Pause(ctx, "q") })
	if !errors.Is(err, jobraft.ErrNotApplied) {
		t.Errorf("Pause: %v, want ErrNotApplied", err)
	}
	timed("Get", func(ctx context.Context) error { _, err := s.Get(ctx, j.ID, jobraft.Linearizable); return err })
	timed("Stats", func(ctx context.Context) error { _, err := s.Stats(ctx); return err })
	if refused == "" {
		t.Fatal("the refused submit named no job ID")
	}

	// Back to a quorum: the same calls succeed, and nothing refused was
	// applied.
	for i := range c.Ctls {
		if i != survivor {
			c.StartMember(i)
		}
	}
	c.WaitLeader(wait)
	ctx = clustertest.Ctx(t, wait)
	if _, err := s.Get(ctx, refused, jobraft.Linearizable); !errors.Is(err, jobraft.ErrNotFound) {
		t.Errorf("the submit refused without a quorum: %v, want ErrNotFound", err)
	}
	got, err := s.Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StatePending {
		t.Errorf("the job a refused cancel named: %+v, %v; want it pending", got, err)
	}
	if _, err := s.Submit(ctx, jobraft.SubmitRequest{Queue: "q", Kind: "k"}); err != nil {
		t.Errorf("Submit with a quorum again: %v", err)
	}
	if _, err := s.Cancel(ctx, j.ID, "r"); err != nil {
		t.Errorf("Cancel with a quorum again: %v", err)
	}
	if err := s.Pause(ctx, "q"); err != nil {
		t.Errorf("Pause with a quorum again: %v", err)
	}
	if _, err := s.Stats(ctx); err != nil {
		t.Errorf("Stats with a quorum again: %v", err)
	}
}

// TestFrozenLeaderWithoutQuorumEndsWithinLeaderWait: a submit forwarded
// to a leader that froze (SIGSTOP) while the third member is down never
// reaches a new leader: none can be elected. It ends within its bound
// anyway, although its context allows a minute: the forward lapses once
// LeaderWait has passed with no leader known (the outcome may_exist: the
// frozen leader may still commit it), and the controller's retry waits at
// most another LeaderWait. Then, the submit sent once the member knows no
// leader ends not_submitted within one LeaderWait. After SIGCONT and a
// restart, the first submit's job exists at most once and the second's
// not at all. (Before the lapse, the forwarded submit waited out its
// context.)
func TestFrozenLeaderWithoutQuorumEndsWithinLeaderWait(t *testing.T) {
	const leaderWait = 2 * time.Second
	// A one-second heartbeat gives the submit sent right after the
	// freeze a second to be forwarded while the leader is still known.
	p := clustertest.StartCtlProcs(t, 3, func(_ int, mc *clustertest.MemberConfig) {
		mc.Timing = clustertest.Timing{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond,
			ProposeTimeout: 10 * time.Second, LeaderWait: leaderWait}
	})
	l := p.WaitLeader(wait)
	s, o := (l+1)%3, (l+2)%3
	p.Kill(o)
	if rep, err := p.CallT(s, "/submit", clustertest.Request{ID: "warm", Queue: "fz"}, wait); err != nil || rep.Outcome != clustertest.OutcomeOK {
		t.Fatalf("a submit with the leader and one follower: %+v %v", rep, err)
	}
	stalltest.Watch()
	p.Pause(l)
	from := time.Now()

	timed := func(id string, bound time.Duration, want ...string) {
		t.Helper()
		start := time.Now()
		rep, err := p.CallT(s, "/submit", clustertest.Request{ID: id, Queue: "fz"}, time.Minute)
		took := time.Since(start)
		stall := stalltest.Between(start, time.Now())
		t.Logf("submit %s without a quorum, the leader frozen: %s %q after %v (%s)", id, rep.Outcome, rep.Error, took.Round(time.Millisecond), stall)
		if err != nil {
			t.Fatalf("submit %s: no reply: %v", id, err)
		}
		if !slices.Contains(want, rep.Outcome) {
			t.Errorf("submit %s: %s, want one of %v", id, rep.Outcome, want)
		}
		if !strings.Contains(rep.Error, "1 of 3 voters reachable") {
			t.Errorf("submit %s: %q does not say how many voters are reachable", id, rep.Error)
		}
		if took > bound+stall.Total {
			t.Errorf("submit %s took %v, want within %v (+ the %v stalled)", id, took, bound, stall.Total)
		}
	}
	// Each wait for a leader ends with a reachability round of at most a
	// second (the frozen leader does not answer it); slack for a loaded
	// machine besides the measured stalls.
	const probe, slack = time.Second, 2 * time.Second
	// Sent while s still knows the frozen leader: forwarded. Its
	// outcome is unknown (the forward lapsed), or, had s noticed the
	// freeze first on a loaded machine, not submitted.
	timed("forwarded", 2*(leaderWait+probe)+slack, clustertest.OutcomeMayExist, clustertest.OutcomeNotSubmitted)
	waitNoLeader(t, p, s, from)
	timed("leaderless", leaderWait+probe+slack, clustertest.OutcomeNotSubmitted)

	p.Resume(l)
	p.Start(o)
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	for i := 0; i < 3; i++ {
		rep, err := p.CallT(i, "/get", clustertest.Request{ID: "leaderless", Local: true}, wait)
		if err != nil || rep.Job != nil {
			t.Errorf("m%d: the submit refused without a quorum: %+v %v, want no such job", i, rep.Job, err)
		}
	}
}

// waitNoLeader polls member i's status until it knows no leader.
func waitNoLeader(t *testing.T, p *clustertest.CtlProcs, i int, from time.Time) {
	t.Helper()
	clustertest.WaitFor(t, wait, fmt.Sprintf("m%d to know no leader after the freeze at %v", i, from.Format(time.StampMilli)), func() bool {
		rep, err := p.CallT(i, "/status", clustertest.Request{}, 5*time.Second)
		return err == nil && rep.Leader == ""
	})
}
