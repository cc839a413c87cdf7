package walcompare_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// sameDivergences fails unless a and b report the same divergences: same
// indexes, runs, classes, committed flags and member views.
func sameDivergences(t *testing.T, what string, a, b *walcompare.Report) {
	t.Helper()
	if len(a.Divergences) != len(b.Divergences) {
		t.Fatalf("%s: %d divergences vs %d:\n%+v\n%+v", what, len(a.Divergences), len(b.Divergences), a.Divergences, b.Divergences)
	}
	for i := range a.Divergences {
		x, y := a.Divergences[i], b.Divergences[i]
		if x.Index != y.Index || x.End != y.End || x.Class != y.Class || x.Committed != y.Committed || x.Member != y.Member || len(x.Views) != len(y.Views) {
			t.Fatalf("%s: divergence %d: %+v vs %+v", what, i, x, y)
		}
		for m := range x.Views {
			if x.Views[m] != y.Views[m] {
				t.Fatalf("%s: index %d member %d: %+v vs %+v", what, x.Index, m, x.Views[m], y.Views[m])
			}
		}
	}
	for _, c := range walcompare.Classes {
		if a.Summary[c] != b.Summary[c] {
			t.Fatalf("%s: summary %v vs %v", what, a.Summary, b.Summary)
		}
	}
	if a.From != b.From || a.End != b.End || a.To != b.To || a.Held != b.Held {
		t.Fatalf("%s: range [%d,%d) held %d vs [%d,%d) held %d", what, a.From, a.End, a.Held, b.From, b.End, b.Held)
	}
}

// TestOnlineMatchesOffline: a real 3-member cluster whose leader is cut off
// while it appends entries it can never commit; the others elect a new
// leader and commit more. Compared live (digest mode, and streaming over
// the RPC), the members report the old leader's tail as an uncommitted
// term mismatch and no committed divergence, without being stopped; then,
// stopped, their data dirs compared offline give the same report.
func TestOnlineMatchesOffline(t *testing.T) {
	faults := faultnet.New(1)
	c := clustertest.StartNodes(t, 3, faults, nil)
	old := c.WaitLeader(10 * time.Second)
	for i := 0; i < 20; i++ {
		if _, err := c.Propose(old, fmt.Sprintf("set k%d v%d", i, i), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(10 * time.Second)

	// Cut the leader off and have it append entries it cannot commit.
	faults.Isolate(hraft.ServerAddress(c.Nodes[old].Addr()))
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.Propose(old, fmt.Sprintf("set lost%d x", i), 500*time.Millisecond)
		}()
	}
	wg.Wait()
	var leader int
	clustertest.WaitFor(t, 10*time.Second, "a new leader", func() bool {
		leader = c.Leader()
		return leader >= 0 && leader != old
	})
	for i := 0; i < 5; i++ {
		if _, err := c.Propose(leader, fmt.Sprintf("set n%d v", i), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Nodes[old].Status(); s.LastIndex <= s.CommitIndex {
		t.Skipf("the cut-off leader appended nothing beyond its commit index (last %d commit %d)", s.LastIndex, s.CommitIndex)
	}

	ctx := context.Background()
	var live []walcompare.Member
	for i, n := range c.Nodes {
		m, err := walcompare.Dial(ctx, c.Cfgs[i].ID, n.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		live = append(live, m)
	}
	online, err := walcompare.Compare(ctx, live, walcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if online.Mode != "digest" {
		t.Fatalf("mode %s", online.Mode)
	}
	if len(online.CommittedDivergences()) != 0 || online.Committed == 0 || online.CommittedBasis != "floors" {
		t.Fatalf("committed %d (%s): %+v", online.Committed, online.Proof, online.CommittedDivergences())
	}
	mismatch := 0
	for _, d := range online.Divergences {
		if d.Class == walcompare.TermMismatch {
			mismatch++
			if d.Views[old].Class != walcompare.TermMismatch && d.Views[old].Class != walcompare.Same {
				t.Fatalf("index %d: %+v", d.Index, d)
			}
		}
	}
	if mismatch == 0 {
		t.Fatalf("no term mismatch reported: %+v", online.Divergences)
	}
	t.Logf("online: %d divergences, boundary %d, %d calls; %s", len(online.Divergences), online.Committed, online.Calls, online.Proof)

	streamed, err := walcompare.Compare(ctx, live, walcompare.Options{Stream: true, Committed: online.Committed})
	if err != nil {
		t.Fatal(err)
	}
	sameDivergences(t, "digest vs stream", online, streamed)
	for i, n := range c.Nodes {
		if n.Status().Role == "Shutdown" {
			t.Fatalf("member %d stopped by the comparison", i)
		}
	}

	c.Close()
	var dirs []walcompare.Member
	for _, cfg := range c.Cfgs {
		m, err := walcompare.OpenDir(cfg.ID, cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		dirs = append(dirs, m)
	}
	// Close persists a floor mark, so the proven boundary may rise;
	// compare against the same boundary.
	offline, err := walcompare.Compare(ctx, dirs, walcompare.Options{Committed: online.Committed})
	if err != nil {
		t.Fatal(err)
	}
	sameDivergences(t, "online vs offline", online, offline)
	floors, err := walcompare.Compare(ctx, dirs, walcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if floors.Committed < online.Committed || len(floors.CommittedDivergences()) != 0 {
		t.Fatalf("offline floors: committed %d < %d or divergences %+v", floors.Committed, online.Committed, floors.CommittedDivergences())
	}
}

var _ = raft.Config{}
