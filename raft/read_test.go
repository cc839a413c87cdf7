package raft_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jobraft/jobraft/internal/proctest"
	"github.com/jobraft/jobraft/raft"
)

// A linearizable read right after a leader change never misses an
// acknowledged write. Round after round the leader process is SIGKILLed, a
// write is acknowledged through a survivor (forwarded to whichever leader
// the survivors elect), and at once every running member reads it — the
// read index covers the write's index; the killed member, restarted from
// its data dir, reads it too.
func TestLinearizableReadAfterLeaderKill(t *testing.T) {
	h := proctest.New(t)
	ms := h.StartCluster(3, nil)
	leader, st := h.Leader(wait, 0)
	for round := 0; round < 3; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := leader.Propose(ctx, []byte(fmt.Sprintf("before%d=v", round))); err != nil {
			t.Fatal(err)
		}
		leader.Kill()
		var live []*proctest.Member
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
		check := func(m *proctest.Member) {
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
		leader, st = h.Leader(wait, st.Term)
	}
	h.WaitConverged(wait)
	h.CheckAlive()
}
