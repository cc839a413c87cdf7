package raft

import (
	metrics "github.com/hashicorp/go-metrics/compat"
)

// Metrics are emitted through go-metrics, the library hashicorp/raft and the
// wal use, so one sink sees all three:
//
//	jobraft.raft.diverged{member}  gauge, 1 while the member is diverged, else 0;
//	                               emitted at start, on detection and every 10 s
//
// The member label keeps members sharing a process (tests, embedded
// clusters) from overwriting each other's value.

func gaugeDiverged(member string, diverged bool) {
	var v float32
	if diverged {
		v = 1
	}
	metrics.SetGaugeWithLabels([]string{"jobraft", "raft", "diverged"}, v, []metrics.Label{{Name: "member", Value: member}})
}
