package raft_test

import (
	"fmt"
	"testing"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/transport"
)

// The committed-prefix checker passes on a healthy cluster and sees every
// member's log.
func TestCheckersOnHealthyCluster(t *testing.T) {
	faults := transport.NewFaultNetwork(7)
	c := nodetest.Start(t, 3, faults, nil)
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
	checkElectionSafety(t, faults)
}
