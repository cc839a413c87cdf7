package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// failoverResult is what the leader kill measured.
type failoverResult struct {
	Killed    string
	OldTerm   uint64
	NewLeader string
	NewTerm   uint64
	// Failover: from the SIGKILL until the survivors agree on a new leader
	// (read through their status API).
	Failover time.Duration
	// Rejoin: from the restart until the member is ready again (it knows
	// the leader and applied up to the commit index).
	Rejoin time.Duration
}

// killLeader finds the leader through the status API, SIGKILLs it, waits
// for the survivors to elect a new one, restarts it and waits for it to be
// ready.
func killLeader(ctx context.Context, c *cluster.Cluster) (*failoverResult, error) {
	leader, term, err := findLeader(ctx, c)
	if err != nil {
		return nil, err
	}
	i := c.Index(leader)
	r := &failoverResult{Killed: leader, OldTerm: term}
	t0 := time.Now()
	if err := c.Kill(i); err != nil {
		return nil, err
	}
	if r.NewLeader, r.NewTerm, err = newLeader(ctx, c, i, term); err != nil {
		return r, err
	}
	r.Failover = time.Since(t0)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t1 := time.Now()
	if err := c.Start(i); err != nil {
		return r, err
	}
	for {
		st, err := c.Members[i].Status(deadline)
		if err == nil && st.Ready && st.LeaderID != "" {
			r.Rejoin = time.Since(t1)
			return r, nil
		}
		select {
		case <-deadline.Done():
			return r, fmt.Errorf("restarted %s not ready within 30s", leader)
		case <-tick.C:
		}
	}
}

// newLeader waits (30 s at most) until every member but member i (the
// leader of term, killed, cut off or frozen) names the same other leader
// in a later term, through their status API.
func newLeader(ctx context.Context, c *cluster.Cluster, i int, term uint64) (string, uint64, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	old := c.Members[i].ID
	for {
		var sts []client.Status
		for j, m := range c.Members {
			if j == i {
				continue
			}
			if st, err := m.Status(deadline); err == nil {
				sts = append(sts, st)
			}
		}
		if len(sts) == len(c.Members)-1 && sts[0].LeaderID != "" && sts[0].LeaderID != old {
			agree := true
			for _, s := range sts {
				agree = agree && s.LeaderID == sts[0].LeaderID && s.Term > term
			}
			if agree {
				return sts[0].LeaderID, sts[0].Term, nil
			}
		}
		select {
		case <-deadline.Done():
			return "", 0, fmt.Errorf("no new leader within 30s after %s (term %d)", old, term)
		case <-tick.C:
		}
	}
}

// findLeader asks the running members who leads, and checks that member
// says so itself.
func findLeader(ctx context.Context, c *cluster.Cluster) (string, uint64, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for i, m := range c.Members {
			if !c.Running(i) {
				continue
			}
			st, err := m.Status(ctx)
			if err != nil || st.LeaderID == "" {
				continue
			}
			j := c.Index(st.LeaderID)
			if j < 0 {
				continue
			}
			if ls, err := c.Members[j].Status(ctx); err == nil && ls.Role == "Leader" {
				return ls.ID, ls.Term, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", 0, errors.New("no leader found through the status API")
		case <-tick.C:
		}
	}
}
