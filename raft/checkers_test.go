package raft_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jobraft/jobraft/transport/faultnet"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// The checkers of docs/scenarios.md, for in-process clusters. Scenario tests
// run them after the faults stop and the members converged:
//
//	acked-set        ledger.check (ledger_test.go)
//	committed prefix checkCommittedPrefix: walcompare over every running member
//	election safety  checkElectionSafety: at most one append-entries sender per term
//	state digest     clustertest.NodeCluster.WaitConverged: equal digest at equal index
//	applied history  checkAppliedHistory, checkAppliedProcs: every entry a
//	                 member's state machine applied is the committed entry at
//	                 its index (internal/test/history); the convergence waits also
//	                 check it on every poll and fail at once, naming it
//	liveness         measured by the scenario and reported with t.Logf

// checkCommittedPrefix compares the logs of every running in-process
// member with walcompare while they run: no committed divergence, no
// payload lost anywhere.
func checkCommittedPrefix(t testing.TB, c *clustertest.NodeCluster) *walcompare.Report {
	t.Helper()
	var members []walcompare.Member
	for _, i := range c.Running() {
		members = append(members, walcompare.FromLogStore(c.Cfgs[i].ID, c.Nodes[i].Log()))
	}
	return checkReport(t, members, 0)
}

// checkProcDirs stops the member processes gracefully and compares their
// data dirs offline with walcompare (see checkReport).
func checkProcDirs(t testing.TB, ms []*clustertest.NodeProc, commit uint64) *walcompare.Report {
	t.Helper()
	var members []walcompare.Member
	for _, m := range ms {
		m.Stop()
		wm, err := walcompare.OpenDir(m.Cfg.ID, m.Cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer wm.Close()
		members = append(members, wm)
	}
	return checkReport(t, members, commit)
}

// checkReport compares members with walcompare: no committed divergence,
// no payload lost, and (commit > 0) a committed boundary proven at least up
// to commit.
func checkReport(t testing.TB, members []walcompare.Member, commit uint64) *walcompare.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := walcompare.Compare(ctx, members, walcompare.Options{})
	if err != nil {
		t.Fatalf("walcompare: %v", err)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	if n := len(rep.CommittedDivergences()); n != 0 || rep.Summary[walcompare.PayloadLost] != 0 {
		t.Fatalf("walcompare: %d committed divergences, %d payload lost\n%s", n, rep.Summary[walcompare.PayloadLost], b.String())
	}
	if rep.Committed < commit {
		t.Errorf("walcompare proved committed only up to %d (%s), below the commit index %d the members reported\n%s", rep.Committed, rep.Proof, commit, b.String())
	}
	t.Logf("walcompare: %d members, committed boundary %d (%s), held %d, summary %v", len(members), rep.Committed, rep.CommittedBasis, rep.Held, rep.Summary)
	return rep
}

// dumpProcs returns every member process's KV (through its control RPC).
func dumpProcs(t testing.TB, ms []*clustertest.NodeProc) map[string]map[string]clustertest.Entry {
	t.Helper()
	dumps := map[string]map[string]clustertest.Entry{}
	for _, m := range ms {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		d, err := m.Dump(ctx)
		cancel()
		if err != nil {
			t.Fatalf("dump %s: %v", m.Cfg.ID, err)
		}
		dumps[m.Cfg.ID] = d
	}
	return dumps
}

// checkElectionSafety fails if two members sent append-entries for the same
// term, as seen on the wire by the fault network.
func checkElectionSafety(t testing.TB, faults *faultnet.Network) {
	t.Helper()
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
}

// liveness measures how long cond takes to hold, failing past bound plus
// the scheduling stalls measured meanwhile (clustertest.WaitFor); it logs the
// stall with the time.
func liveness(t testing.TB, what string, bound time.Duration, cond func() bool) time.Duration {
	t.Helper()
	w := stalltest.Start()
	clustertest.WaitFor(t, bound, what, cond)
	d := w.Elapsed()
	t.Logf("liveness: %s in %v (bound %v, %v)", what, d.Round(time.Millisecond), bound, w.Stall())
	return d
}

// checkNoGuardRefusals fails for every guard refusal queued on a member's
// event subscription (drained without waiting).
func checkNoGuardRefusals(t testing.TB, who string, events <-chan raft.Event) {
	t.Helper()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Kind == raft.EventGuardRefusal {
				t.Errorf("guard refusal on %s: %v", who, e.Err)
			}
		default:
			return
		}
	}
}

// checkAppliedHistory runs the final applied-history check of an
// in-process cluster (every member, running or stopped, against the
// leader's log; after convergence): a violation is a safety failure.
func checkAppliedHistory(t testing.TB, c *clustertest.NodeCluster) history.Stats {
	t.Helper()
	if vs := c.CheckApplied(true); len(vs) > 0 {
		t.Fatal(clustertest.ViolationReport(vs))
	}
	return appliedStats(t, c.AppliedStats())
}

// checkAppliedProcs is checkAppliedHistory for member processes: their
// history files against the running leader's log, read over RPC. Run it
// before checkProcDirs stops them.
func checkAppliedProcs(t testing.TB, h *clustertest.NodeProcs) history.Stats {
	t.Helper()
	if vs := h.CheckApplied(true); len(vs) > 0 {
		t.Fatal(clustertest.ViolationReport(vs))
	}
	return appliedStats(t, h.AppliedStats())
}

func appliedStats(t testing.TB, st history.Stats) history.Stats {
	t.Helper()
	if st.Applied == 0 || st.Verified == 0 {
		t.Fatalf("applied-history check verified nothing: %v", st)
	}
	t.Logf("applied history: %v", st)
	return st
}
