package raft_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

func proposeN(t *testing.T, c *clustertest.NodeCluster, on int, prefix string, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		proposeAcrossChurn(t, c, on, fmt.Sprintf("%s%d=v", prefix, k), wait)
	}
}

// voters returns the sorted IDs of the voters in st's configuration, and
// the number of non-voters.
func voters(st raft.Status) ([]string, int) {
	var ids []string
	non := 0
	for _, m := range st.Members {
		if m.Voter {
			ids = append(ids, m.ID)
		} else {
			non++
		}
	}
	sort.Strings(ids)
	return ids, non
}

func waitVoters(t *testing.T, c *clustertest.NodeCluster, on int, want ...string) {
	t.Helper()
	sort.Strings(want)
	clustertest.WaitFor(t, wait, fmt.Sprintf("m%d to see voters %v", on, want), func() bool {
		ids, non := voters(c.Nodes[on].Status())
		return non == 0 && fmt.Sprint(ids) == fmt.Sprint(want)
	})
}

// A member dies for good; a new member is added (through a follower, as a
// non-voter first, promoted once caught up) and the dead one removed. The
// cluster ends with three voters, the new one holding every key.
func TestReplaceDeadMember(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 20)
	dead := (l + 1) % 3
	live := (l + 2) % 3
	c.StopMember(dead)
	proposeN(t, c, live, "b", 10)
	n := c.Join(live, "m3", wait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[n].RemoveMember(ctx, c.Cfgs[dead].ID); err != nil {
		t.Fatal(err)
	}
	proposeN(t, c, n, "c", 10)
	for _, i := range []int{l, live, n} {
		waitVoters(t, c, i, c.Cfgs[l].ID, c.Cfgs[live].ID, "m3")
	}
	c.WaitConvergedOf(wait, l, live, n)
	for _, i := range []int{l, live, n} {
		if got := c.KVs[i].Len(); got != 40 {
			t.Fatalf("m%d holds %d keys, want 40", i, got)
		}
	}
	// The remaining three tolerate one more failure.
	c.StopMember(l)
	clustertest.WaitFor(t, wait, "a leader among the two others", func() bool { return c.Leader() >= 0 })
	proposeN(t, c, n, "d", 5)
}

// The leader removes itself: it steps down once the change commits, the
// other two elect a leader and keep committing; the removed member serves
// no more proposals.
func TestRemoveLeader(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 10)
	term := c.Nodes[l].Status().Term
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].RemoveMember(ctx, c.Cfgs[l].ID); err != nil {
		t.Fatal(err)
	}
	var others []int
	var ids []string
	for i := range c.Nodes {
		if i != l {
			others = append(others, i)
			ids = append(ids, c.Cfgs[i].ID)
		}
	}
	clustertest.WaitFor(t, wait, "the removed leader to step down", func() bool { return c.Nodes[l].Status().Role != "Leader" })
	var nl int
	clustertest.WaitFor(t, wait, "a new leader among the others", func() bool {
		nl = c.Leader()
		return nl >= 0 && nl != l && c.Nodes[nl].Status().Term > term
	})
	for _, i := range others {
		waitVoters(t, c, i, ids...)
	}
	proposeN(t, c, others[0], "b", 10)
	proposeN(t, c, others[1], "c", 10)
	c.WaitConvergedOf(wait, others...)
	if _, err := c.Propose(l, "removed=1", time.Second); err == nil {
		t.Fatal("the removed member committed a proposal")
	} else if !errors.Is(err, raft.ErrRejected) && !errors.Is(err, raft.ErrIndeterminate) {
		t.Fatalf("unclassified error %v", err)
	}
	for _, i := range others {
		if got := c.KVs[i].Len(); got != 30 || c.KVs[i].Writes("removed") != 0 {
			t.Fatalf("m%d holds %d keys (removed written %d times)", i, got, c.KVs[i].Writes("removed"))
		}
	}
}

// Three members grow to five (each new one a non-voter until caught up,
// under a load of proposals), then two of the original followers are
// removed; the leader reports each change as an event.
func TestFiveMemberAddRemove(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	events, cancelEvents := c.Nodes[l].Events(256)
	defer cancelEvents()
	led := newLedger()
	stop := make(chan struct{})
	wg := loadNodes(c, "x", 3, led, stop)
	n3 := c.Join(l, "m3", wait)
	n4 := c.Join((l+1)%3, "m4", wait)
	close(stop)
	wg.Wait()
	all := []string{"m0", "m1", "m2", "m3", "m4"}
	waitVoters(t, c, l, all...)
	for i := range c.Nodes {
		for k := 0; k < 4; k++ {
			key := fmt.Sprintf("five%d-%d", i, k)
			lead := leadershipOf(c)
			_, err := c.Propose(i, key+"=v", wait)
			led.record(key, err)
			if err != nil {
				lead.excuse(t, c, err, "propose "+key) // the ledger judges its outcome
			}
		}
	}
	c.WaitConverged(wait)
	led.check(t, dumpAll(c))
	gone := []int{(l + 1) % 3, (l + 2) % 3}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, g := range gone {
		if err := c.Nodes[n3].RemoveMember(ctx, c.Cfgs[g].ID); err != nil {
			t.Fatal(err)
		}
	}
	keep := []int{l, n3, n4}
	waitVoters(t, c, l, c.Cfgs[l].ID, "m3", "m4")
	proposeN(t, c, n4, "after", 10)
	c.WaitConvergedOf(wait, keep...)
	for _, i := range keep {
		if c.KVs[i].Writes("after9") != 1 {
			t.Fatalf("m%d misses the last write", i)
		}
	}
	added, removed := map[string]bool{}, map[string]bool{}
	clustertest.WaitFor(t, wait, "member events on the leader", func() bool {
		for {
			select {
			case e := <-events:
				switch e.Kind {
				case raft.EventMemberAdded:
					added[e.Member.ID] = true
				case raft.EventMemberRemoved:
					removed[e.Member.ID] = true
				}
			default:
				return added["m3"] && added["m4"] && removed[c.Cfgs[gone[0]].ID] && removed[c.Cfgs[gone[1]].ID]
			}
		}
	})
}

// An AddMember forwarded to the leader runs there until the policy's
// verdict; when that leader stops leading after more than LeaderWait, the
// caller asks the next leader, whose verdict it returns, instead of giving
// up with ErrNoLeader at once (its wait for a leader starts when the
// leader it asked stopped leading, as for an add run locally). Before,
// the time the add ran on the old leader counted against LeaderWait.
func TestForwardedAddOutlivingItsLeaderIsAskedOfTheNext(t *testing.T) {
	const leaderWait = time.Second
	faults := faultnet.New(time.Now().UnixNano())
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) {
		cfg.LeaderWait = leaderWait
		cfg.CatchUp = catchup.Policy{UnreachableRounds: 20}
	})
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	k := c.NewMember("m3", nil)
	for from := range 3 {
		c.Faults.Cut(addr(c.Nodes[from]), addr(c.Nodes[k])) // never caught up: the add waits for the verdict
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		done <- c.Nodes[f].AddMember(ctx, "m3", c.Nodes[k].Addr())
	}()
	clustertest.WaitFor(t, wait, "the add to run on the leader for more than LeaderWait", func() bool {
		in := false
		for _, m := range c.Nodes[l].Status().Members {
			in = in || m.ID == "m3"
		}
		return in && time.Since(start) > leaderWait+leaderWait/2
	})
	select {
	case err := <-done:
		t.Fatalf("the add ended before the transfer: %v", err)
	default:
	}
	if err := c.Nodes[l].Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	err := <-done
	t.Logf("the add, forwarded from m%d, after the leader m%d stepped down: %v (%v)", f, l, err, time.Since(start).Round(time.Millisecond))
	if errors.Is(err, raft.ErrNoLeader) || !errors.Is(err, raft.ErrStalled) {
		t.Fatalf("the add: %v; want the next leader's verdict, ErrStalled", err)
	}
}
