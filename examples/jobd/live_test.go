package main

import (
	"context"
	"testing"

	jobdcluster "github.com/jobraft/jobraft/examples/internal/cluster"
)

// liveCluster starts a 3-member jobd cluster (real processes on loopback,
// SIGKILLed at cleanup) and waits until every member is ready.
func liveCluster(t *testing.T, flags ...string) *jobdcluster.Cluster {
	t.Helper()
	bin := jobdBinary(t)
	c, err := jobdcluster.New(context.Background(), jobdcluster.Options{Dir: t.TempDir(), Members: 3, Flags: flags}, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		waitReadyURL(t, "http://"+m.HTTPAddr, nil, logFile(m.LogPath))
	}
	return c
}

// leaderOf returns the index of the member every member names as leader.
func leaderOf(t *testing.T, c *jobdcluster.Cluster) int {
	t.Helper()
	st, err := c.Members[0].Client.Status(context.Background(), "", true)
	if err != nil {
		t.Fatal(err)
	}
	i := c.Index(st.Self.LeaderID)
	if i < 0 {
		t.Fatalf("leader %q is not a member", st.Self.LeaderID)
	}
	return i
}
