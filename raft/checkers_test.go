package raft_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/walcompare"
)

// The checkers of SCENARIOS.md, for in-process clusters. Scenario tests
// run them after the faults stop and the members converged:
//
//	acked-set        ledger.check (ledger_test.go)
//	committed prefix checkCommittedPrefix: walcompare over every running member
//	election safety  checkElectionSafety: at most one append-entries sender per term
//	state digest     nodetest.Cluster.WaitConverged: equal digest at equal index
//	liveness         measured by the scenario and reported with t.Logf

// checkCommittedPrefix compares the logs of every running member with
// walcompare, online (by range digests over the members' RPC channel,
// while they run): no committed divergence, no payload lost anywhere.
func checkCommittedPrefix(t testing.TB, c *nodetest.Cluster) *walcompare.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var members []walcompare.Member
	for _, i := range c.Running() {
		members = append(members, walcompare.FromLogStore(c.Cfgs[i].ID, c.Nodes[i].Log()))
	}
	rep, err := walcompare.Compare(ctx, members, walcompare.Options{})
	if err != nil {
		t.Fatalf("walcompare: %v", err)
	}
	if n := len(rep.CommittedDivergences()); n != 0 || rep.Summary[walcompare.PayloadLost] != 0 {
		var b bytes.Buffer
		rep.WriteTable(&b)
		t.Fatalf("walcompare: %d committed divergences, %d payload lost\n%s", n, rep.Summary[walcompare.PayloadLost], b.String())
	}
	return rep
}

// checkElectionSafety fails if two members sent append-entries for the same
// term, as seen on the wire by the fault network.
func checkElectionSafety(t testing.TB, faults *transport.FaultNetwork) {
	t.Helper()
	if err := faults.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
}

// liveness measures how long cond takes to hold, failing past bound.
func liveness(t testing.TB, what string, bound time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	nodetest.WaitFor(t, bound, what, cond)
	d := time.Since(start)
	t.Logf("liveness: %s in %v (bound %v)", what, d.Round(time.Millisecond), bound)
	return d
}
