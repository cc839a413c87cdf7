package raft_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

const wait = 15 * time.Second

func TestClusterProposalsFromEveryMember(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := clustertest.StartNodes(t, size, nil, nil)
			c.WaitLeader(wait)
			for i := 0; i < size; i++ {
				for k := 0; k < 10; k++ {
					res, retried := proposeAcrossChurn(t, c, i, fmt.Sprintf("k%d-%d=v", i, k), wait)
					if res.Index == 0 || (len(res.Data) != 0 && !(retried && string(res.Data) == "v")) {
						t.Fatalf("result %+v (retried %v)", res, retried)
					}
				}
			}
			c.WaitConverged(wait)
			for i, kv := range c.KVs {
				if kv.Len() != size*10 {
					t.Fatalf("m%d holds %d keys", i, kv.Len())
				}
			}
			// The previous value comes back as the result.
			res, retried := proposeAcrossChurn(t, c, 0, "k0-0=w", wait)
			if string(res.Data) != "v" && !(retried && string(res.Data) == "w") {
				t.Fatalf("result %q (retried %v)", res.Data, retried)
			}
		})
	}
}

func TestLinearizableReadOnFollower(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	for k := 0; k < 20; k++ {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("x=%d", k), wait)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		idx, err := c.Nodes[f].LinearizableRead(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := c.KVs[f].Get("x"); v != fmt.Sprint(k) {
			t.Fatalf("read on follower after acked write %d saw %q (read index %d)", k, v, idx)
		}
	}
}

// The leader stops without warning; a new leader of a higher term takes
// over, nothing acknowledged is lost, and the old leader restarts from its
// data dir and converges.
func TestLeaderStopAndRestart(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	for k := 0; k < 50; k++ {
		proposeAcrossChurn(t, c, (l+k)%3, fmt.Sprintf("a%d=1", k), wait)
	}
	term := c.Nodes[l].Status().Term
	c.StopMember(l)
	nl := c.WaitLeader(wait)
	if nl == l || c.Nodes[nl].Status().Term <= term {
		t.Fatalf("new leader m%d term %d, old term %d", nl, c.Nodes[nl].Status().Term, term)
	}
	for k := 50; k < 100; k++ {
		proposeAcrossChurn(t, c, nl, fmt.Sprintf("a%d=1", k), wait)
	}
	c.StartMember(l)
	c.WaitConverged(wait)
	for i, kv := range c.KVs {
		if kv.Len() != 100 {
			t.Fatalf("m%d holds %d keys", i, kv.Len())
		}
	}
}

// A leader cut off from the others: a proposal on it is never reported as
// a success; it is indeterminate (appended, never committed) or rejected.
// After the partition heals its uncommitted tail is cut through the seam
// and it converges.
func TestPartitionedLeaderProposalIndeterminate(t *testing.T) {
	faults := faultnet.New(1)
	c := clustertest.StartNodes(t, 3, faults, nil)
	l := c.WaitLeader(wait)
	proposeAcrossChurn(t, c, l, "before=1", wait)
	c.WaitConverged(wait)
	faults.Isolate(hraft.ServerAddress(c.Nodes[l].Addr()))
	_, err := c.Propose(l, "lost=1", 3*time.Second)
	if err == nil {
		t.Fatal("a proposal on an isolated leader reported success")
	}
	if !errors.Is(err, raft.ErrIndeterminate) && !errors.Is(err, raft.ErrRejected) {
		t.Fatalf("unclassified error %v", err)
	}
	t.Logf("isolated leader's proposal: %v", err)
	var nl int
	clustertest.WaitFor(t, wait, "a leader among the others", func() bool {
		for i, n := range c.Nodes {
			if i != l && n.Status().Role == "Leader" {
				nl = i
				return true
			}
		}
		return false
	})
	proposeAcrossChurn(t, c, nl, "after=1", wait)
	faults.Heal()
	c.WaitConverged(wait)
	if _, ok := c.KVs[l].Get("lost"); ok && errors.Is(err, raft.ErrRejected) {
		t.Fatal("a rejected proposal was applied")
	}
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
}

func TestStatusOverRPCAndEvents(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	events, cancel := c.Nodes[0].Events(64)
	defer cancel()
	l := c.WaitLeader(wait)
	proposeAcrossChurn(t, c, l, "s=1", wait)
	c.WaitConverged(wait)
	ctx, cancelCtx := context.WithTimeout(context.Background(), wait)
	defer cancelCtx()
	for i := range c.Nodes {
		s, err := c.Nodes[0].StatusOf(ctx, c.Nodes[i].Addr())
		if err != nil {
			t.Fatal(err)
		}
		local := c.Nodes[i].Status()
		if s.ID != local.ID || s.Digest != local.Digest || len(s.Members) != 3 || s.LeaderID != c.Nodes[l].ID() {
			t.Fatalf("status of m%d over RPC %+v, local %+v", i, s, local)
		}
	}
	// The first election may be over before the subscription (events are
	// not replayed; on a loaded machine the members open slowly): hand the
	// leadership on, and m0 must report that change.
	to := (l + 1) % 3
	clustertest.WaitFor(t, wait, fmt.Sprintf("m0's leader-change event naming m%d", to), func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventLeaderChange && e.Leader == c.Cfgs[to].ID {
					return true
				}
				continue
			default:
			}
			break
		}
		if ld := c.Leader(); ld >= 0 && ld != to {
			tctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = c.Nodes[ld].TransferLeadership(tctx, c.Cfgs[to].ID) // refused while to catches up: the next poll retries
			cancel()
		}
		return false
	})
}

func TestAddAndRemoveMember(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	for k := 0; k < 30; k++ {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("m%d=1", k), wait)
	}
	cfg := clustertest.FastConfig(t, "m3", t.TempDir(), clustertest.FreeAddr(t))
	kv := clustertest.NewKV()
	n4, err := raft.Open(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer n4.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// Added through a follower: forwarded to the leader.
	if err := c.Nodes[(l+1)%3].AddMember(ctx, "m3", n4.Addr()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, wait, "m3 to apply every key", func() bool { return kv.Len() == 30 })
	st := c.Nodes[l].Status()
	voters := 0
	for _, m := range st.Members {
		if m.Voter {
			voters++
		}
	}
	if voters != 4 {
		t.Fatalf("members %+v", st.Members)
	}
	if err := c.Nodes[l].RemoveMember(ctx, "m3"); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Nodes[l].Status().Members); n != 3 {
		t.Fatalf("%d members after remove", n)
	}
}

// A follower cut off while the others compact past it receives a snapshot
// through the sealed store and converges.
func TestSnapshotInstallToLaggingMember(t *testing.T) {
	faults := faultnet.New(2)
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) { cfg.TrailingLogs = 8 })
	l := c.WaitLeader(wait)
	lag := (l + 1) % 3
	faults.Isolate(hraft.ServerAddress(c.Nodes[lag].Addr()))
	for k := 0; k < 100; k++ {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("s%d=1", k), wait)
	}
	for i, n := range c.Nodes {
		if i != lag {
			if err := n.Raft().Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if first := c.Nodes[l].Status().FirstIndex; first <= c.Nodes[lag].Status().LastIndex+1 {
		t.Fatalf("leader log starts at %d: no install would be needed", first)
	}
	faults.Heal()
	c.WaitConverged(wait)
	if c.KVs[lag].Len() != 100 {
		t.Fatalf("lagging member holds %d keys", c.KVs[lag].Len())
	}
}

// On an idle cluster the applied index reaches the commit index although
// the last entries (a new leader's no-op) never reach the state machine:
// readiness checks compare the two.
func TestAppliedIndexReachesCommitWhenIdle(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeAcrossChurn(t, c, l, "x=1", wait)
	c.StopMember(l) // the next leader commits a no-op of its term and nothing else
	nl := c.WaitLeader(wait)
	clustertest.WaitFor(t, wait, "applied to reach commit on every member", func() bool {
		for i, n := range c.Nodes {
			if n == nil {
				continue
			}
			s := n.Status()
			if s.CommitIndex == 0 || s.AppliedIndex != s.CommitIndex || (i == nl && s.Digest.Index >= s.CommitIndex) {
				return false
			}
		}
		return true
	})
}
