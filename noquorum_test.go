package jobraft_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/ctltest"
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
	c := ctltest.Start(t, 3, func(_ int, cfg *jobraft.Config) { cfg.LeaderWait = leaderWait })
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
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
	ctx = ctltest.Ctx(t, wait)
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
