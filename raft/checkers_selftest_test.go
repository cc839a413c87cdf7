package raft_test

import (
	"fmt"
	"testing"

	"github.com/jobraft/jobraft/transport/faultnet"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// The committed-prefix and applied-history checkers pass on a healthy
// cluster and see every member's log and history. (The applied-history
// checker's own self-test, which feeds it stale and legal histories, is in
// internal/test/history; seam_history_test.go runs it against a real stale
// apply.)
func TestCheckersOnHealthyCluster(t *testing.T) {
	faults := faultnet.New(7)
	c := clustertest.StartNodes(t, 3, faults, nil)
	l := c.WaitLeader(wait)
	led := newLedger()
	for k := 0; k < 20; k++ {
		key := fmt.Sprintf("h%d", k)
		_, err := c.Propose(l, key+"=v", wait)
		led.record(key, err)
	}
	c.WaitConverged(wait)
	led.check(t, dumpAll(c))
	rep := checkCommittedPrefix(t, c)
	if rep.Committed == 0 || len(rep.Members) != 3 {
		t.Fatalf("report: committed %d, %d members", rep.Committed, len(rep.Members))
	}
	st := checkAppliedHistory(t, c)
	if want := 3 * 20; st.Verified < want {
		t.Fatalf("applied history verified %d records, want at least %d (20 commands on 3 members): %v", st.Verified, want, st)
	}
	checkElectionSafety(t, faults)
}
