package main

import (
	"context"
	"fmt"
	"time"

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
	leader, term, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	i := c.Index(leader)
	r := &failoverResult{Killed: leader, OldTerm: term}
	t0 := time.Now()
	if err := c.Kill(i); err != nil {
		return nil, err
	}
	if r.NewLeader, r.NewTerm, err = c.NewLeader(ctx, i, term); err != nil {
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
