package raft_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// A linearizable read right after a leader change never misses an
// acknowledged write. Round after round the leader process is SIGKILLed, a
// write is acknowledged through a survivor (forwarded to whichever leader
// the survivors elect), and at once every running member reads it — the
// read index covers the write's index; the killed member, restarted from
// its data dir, reads it too.
func TestLinearizableReadAfterLeaderKill(t *testing.T) {
	h := clustertest.NewNodeProcs(t)
	ms := h.StartCluster(3, nil)
	leader, st := h.LeaderProc(wait, 0)
	for round := 0; round < 3; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := leader.Propose(ctx, []byte(fmt.Sprintf("before%d=v", round))); err != nil {
			t.Fatal(err)
		}
		leader.Kill()
		var live []*clustertest.NodeProc
		for _, m := range ms {
			if m.Running() {
				live = append(live, m)
			}
		}
		key, val := fmt.Sprintf("r%d", round), fmt.Sprint(round)
		// Forwarded right after the kill, the write may go to the dead
		// leader over a pooled connection: indeterminate is the honest
		// answer then. Setting the same value again is idempotent, so
		// retry until one attempt is acknowledged.
		var idx uint64
		for {
			var err error
			idx, err = live[round%2].Propose(ctx, []byte(key+"="+val))
			if err == nil {
				break
			}
			if !errors.Is(err, raft.ErrIndeterminate) || ctx.Err() != nil {
				t.Fatalf("round %d: write after the kill: %v", round, err)
			}
		}
		check := func(m *clustertest.NodeProc) {
			t.Helper()
			v, found, ridx, err := m.Read(ctx, key)
			if err != nil {
				t.Fatalf("round %d: read on %s: %v", round, m.Cfg.ID, err)
			}
			if !found || v != val || ridx < idx {
				t.Fatalf("round %d: read on %s after the write at %d acknowledged: %q found=%v read index %d", round, m.Cfg.ID, idx, v, found, ridx)
			}
		}
		for _, m := range live {
			check(m)
		}
		leader.Restart()
		check(leader)
		leader, st = h.LeaderProc(wait, st.Term)
	}
	h.WaitConverged(wait)
	h.CheckAlive()
}

// termLiar answers the leader's term confirmations (the jr.term RPC) with a
// later term while lying is set: followers that moved on to a new leader,
// while raft's own heartbeats between the same members still succeed — the
// shape of a leader resumed with a heartbeat's old answer in flight (U12).
type termLiar struct {
	transport.Caller
	lying *atomic.Bool
}

func (c termLiar) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	if method == "jr.term" && c.lying.Load() {
		return binary.LittleEndian.AppendUint64(nil, 1<<40), nil
	}
	return c.Caller.Call(ctx, addr, method, req)
}

// A leader serves a linearizable read only once a majority answered, to
// requests sent after the read began, with no later term than its own.
// hashicorp/raft's VerifyLeader would pass here (its heartbeats succeed),
// and did pass on a resumed old leader (TestScenarioPausedLeader, a stale
// read under load).
func TestReadNeedsAMajorityInTheLeadersTermNow(t *testing.T) {
	var lying atomic.Bool
	c := clustertest.StartNodesOpts(t, 3, nil, nil, nil, func(int) []nodeopt.Option {
		return []nodeopt.Option{nodeopt.WrapCaller(func(_ string, inner transport.Caller) transport.Caller {
			return termLiar{Caller: inner, lying: &lying}
		})}
	})
	l := c.WaitLeader(wait)
	if _, err := c.Propose(l, "set k v", wait); err != nil {
		t.Fatal(err)
	}
	lying.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	idx, err := c.Nodes[l].LinearizableRead(ctx)
	cancel()
	if err == nil {
		t.Fatalf("read served at index %d while a majority answered a later term", idx)
	}
	if _, err := c.Propose(l, "set k2 v", wait); err != nil {
		t.Fatalf("propose while only the term answers lie (raft's heartbeats fine): %v", err)
	}
	lying.Store(false)
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Nodes[l].LinearizableRead(ctx); err != nil {
		t.Fatalf("read once the term answers are true: %v", err)
	}
}

// termLiarTo answers the leader's term confirmations (jr.term) to the
// members whose addresses are in lying with a later term, as termLiar does
// to all.
type termLiarTo struct {
	transport.Caller
	lying *sync.Map // address -> struct{}
}

func (c termLiarTo) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	if _, ok := c.lying.Load(addr); ok && method == "jr.term" {
		return binary.LittleEndian.AppendUint64(nil, 1<<40), nil
	}
	return c.Caller.Call(ctx, addr, method, req)
}

// With four voters a read needs three of them (the leader counting) to
// confirm its term: two of four — the leader and one follower — are not a
// majority (U12). Two followers answer the term round with a later term
// while raft's heartbeats keep succeeding: the read is refused; with one
// of them truthful again, three of four confirm and the read is served.
func TestReadWithFourVotersNeedsThreeOfThem(t *testing.T) {
	var lying sync.Map
	c := clustertest.StartNodesOpts(t, 4, nil, nil, nil, func(int) []nodeopt.Option {
		return []nodeopt.Option{nodeopt.WrapCaller(func(_ string, inner transport.Caller) transport.Caller {
			return termLiarTo{Caller: inner, lying: &lying}
		})}
	})
	l := c.WaitLeader(wait)
	if _, err := c.Propose(l, "set k v", wait); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	_, err := c.Nodes[l].LinearizableRead(ctx)
	cancel()
	if err != nil {
		t.Fatalf("read with every follower truthful: %v", err)
	}
	var followers []string
	for i, n := range c.Nodes {
		if i != l {
			followers = append(followers, n.Addr())
		}
	}
	lying.Store(followers[0], struct{}{})
	lying.Store(followers[1], struct{}{})
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	idx, err := c.Nodes[l].LinearizableRead(ctx)
	cancel()
	if err == nil {
		t.Fatalf("read served at index %d with two of four voters (the leader and one follower) confirming its term", idx)
	}
	if st := c.Nodes[l].Status(); st.Role != "Leader" {
		t.Fatalf("m%d is %s: the refusal must come from the term round, with raft's heartbeats fine", l, st.Role)
	}
	lying.Delete(followers[1])
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Nodes[l].LinearizableRead(ctx); err != nil {
		t.Fatalf("read with three of four voters confirming its term: %v", err)
	}
}

// A new leader writes one barrier for its term, however many linearizable
// reads reach it before that barrier commits: they share the observer's
// (read.go, readyFlight). Each read used to write its own.
func TestNewLeaderWritesOneBarrierForConcurrentReads(t *testing.T) {
	faults := faultnet.New(7)
	// hashicorp/raft gives a leadership transfer one election timeout to
	// end; under the 40 ms delays below it takes at least four one-way
	// trips (TimeoutNow, a vote round, the old leader hearing the new
	// term), and on a loaded machine scheduling stalls come on top: the
	// fast config's 300 ms failed it ("leadership transfer timeout").
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = 2*time.Second, 2*time.Second
	})
	l := c.WaitLeader(wait)
	proposeKeys(t, c, l, "a", 3)
	c.WaitConverged(wait)
	to := (l + 1) % 3
	// Slow every message, so the new leader's first barrier takes a while
	// to commit and the reads below arrive while it is in flight.
	faults.SetDelay(40*time.Millisecond, 0)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Nodes[l].TransferLeadership(ctx, c.Cfgs[to].ID); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, wait, "the new leader", func() bool { return c.Nodes[to].Status().Role == "Leader" })
	term := c.Nodes[to].Status().Term
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Nodes[to].LinearizableRead(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("read on the new leader: %v", err)
	}
	faults.SetDelay(0, 0)
	if got := c.Nodes[to].Status().Term; got != term {
		t.Fatalf("term moved from %d to %d during the reads: not the shape", term, got)
	}
	first, _ := c.Nodes[to].Log().FirstIndex()
	last, _ := c.Nodes[to].Log().LastIndex()
	barriers := 0
	for i := first; i <= last; i++ {
		var e hraft.Log
		if err := c.Nodes[to].Log().GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		if e.Term == term && e.Type == hraft.LogBarrier {
			barriers++
		}
	}
	if barriers != 1 {
		t.Fatalf("%d barriers in the new leader's term %d, want 1", barriers, term)
	}
}
