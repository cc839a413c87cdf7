package raft_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// AddMember of a member started for another cluster is refused by the
// leader, asked directly or through a follower: ErrClusterMismatch with
// both IDs, and nothing enters the configuration. A member that does not
// answer is refused too (ErrMemberUnreachable): its cluster ID cannot be
// checked. One of the cluster's own ID joins.
func TestAddMemberRefusesAnotherCluster(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.ClusterID = "blue" })
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	j := c.NewMember("m3", func(cfg *raft.Config) { cfg.ClusterID = "green" })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, via := range []int{l, f} {
		err := c.Nodes[via].AddMember(ctx, "m3", c.Nodes[j].Addr())
		var ce *raft.ClusterMismatchError
		if !errors.Is(err, raft.ErrClusterMismatch) || !strings.Contains(err.Error(), `"green"`) || !strings.Contains(err.Error(), `"blue"`) {
			t.Fatalf("add through m%d: %v; want ErrClusterMismatch naming both IDs", via, err)
		}
		if via == l && (!errors.As(err, &ce) || ce.Cluster != "blue" || ce.Other != "green" || !ce.Leader) {
			t.Fatalf("add on the leader: %#v", ce)
		}
	}
	if st := c.Nodes[l].Status(); len(st.Members) != 3 {
		t.Fatalf("the configuration changed: %+v", st.Members)
	}
	if err := c.Nodes[l].AddMember(ctx, "m9", clustertest.FreeAddr(t)); !errors.Is(err, raft.ErrMemberUnreachable) {
		t.Fatalf("add of a member that does not run: %v; want ErrMemberUnreachable", err)
	}
	if st := c.Nodes[l].Status(); len(st.Members) != 3 {
		t.Fatalf("the configuration changed: %+v", st.Members)
	}
	k := c.NewMember("m4", nil) // the cluster's tweak: "blue"
	if err := c.Nodes[f].AddMember(ctx, "m4", c.Nodes[k].Addr()); err != nil {
		t.Fatalf("add of a member of the cluster: %v", err)
	}
	if st := c.Nodes[k].Status(); st.LastIndex == 0 || st.ClusterID != "blue" || st.ClusterRefused != "" {
		t.Fatalf("the joined member: last %d, cluster %q, refused %q", st.LastIndex, st.ClusterID, st.ClusterRefused)
	}
}

// A member waiting to be added checks its first leader's cluster ID
// before it takes an append: added straight through hashicorp/raft (as a
// leader that does not check would), a member started for another cluster
// refuses every append and never stores an entry; its Status says why,
// naming both IDs, and it publishes one EventClusterMismatch however many
// appends it refuses. The member removed, one of the cluster's own ID
// added the same way joins and catches up.
func TestJoinerRefusesLeaderOfAnotherCluster(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.ClusterID = "blue" })
	l := c.WaitLeader(wait)
	j := c.NewMember("m3", func(cfg *raft.Config) { cfg.ClusterID = "green" })
	events, stop := c.Nodes[j].Events(64)
	defer stop()
	// add goes straight to hashicorp/raft on whichever member leads (on a
	// loaded machine leadership may move between the calls).
	add := func(id, addr string) {
		t.Helper()
		var err error
		clustertest.WaitFor(t, wait, "AddNonvoter "+id+" on the leader", func() bool {
			err = c.Nodes[c.WaitLeader(wait)].Raft().AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, wait).Error()
			return !errors.Is(err, hraft.ErrNotLeader) && !errors.Is(err, hraft.ErrLeadershipLost)
		})
		if err != nil {
			t.Fatalf("AddNonvoter %s: %v", id, err)
		}
	}
	add("m3", c.Nodes[j].Addr())
	clustertest.WaitFor(t, wait, "m3 to refuse the leader", func() bool { return c.Nodes[j].Status().ClusterRefused != "" })
	for k := range 20 {
		if _, err := c.Propose(l, fmt.Sprintf("set k%d v", k), wait); err != nil {
			t.Fatal(err)
		}
	}
	// Many appends and heartbeats later (the leader retries a refused
	// member with a backoff): still nothing stored.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if st := c.Nodes[j].Status(); st.LastIndex != 0 || len(st.Members) != 0 || st.LeaderID != "" {
			t.Fatalf("a member of another cluster took the leader's appends: last %d, members %v, leader %q", st.LastIndex, st.Members, st.LeaderID)
		}
		time.Sleep(50 * time.Millisecond) // sampling a state that must not change
	}
	st := c.Nodes[j].Status()
	if !strings.Contains(st.ClusterRefused, `"blue"`) || !strings.Contains(st.ClusterRefused, `"green"`) {
		t.Fatalf("refusal %q does not name both IDs", st.ClusterRefused)
	}
	mismatches := 0
	for len(events) > 0 {
		if ev := <-events; ev.Kind == raft.EventClusterMismatch {
			mismatches++
			if !errors.Is(ev.Err, raft.ErrClusterMismatch) {
				t.Fatalf("event error %v", ev.Err)
			}
		}
	}
	if mismatches != 1 {
		t.Fatalf("%d cluster-mismatch events, want 1", mismatches)
	}

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].RemoveMember(ctx, "m3"); err != nil {
		t.Fatal(err)
	}
	k := c.NewMember("m4", nil)
	add("m4", c.Nodes[k].Addr())
	clustertest.WaitFor(t, wait, "m4 to catch up", func() bool {
		return c.Nodes[k].Status().LastIndex >= c.Nodes[l].Status().CommitIndex
	})
	if st := c.Nodes[k].Status(); st.ClusterRefused != "" {
		t.Fatalf("the member of the cluster: refused %q", st.ClusterRefused)
	}
}
