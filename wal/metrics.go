package wal

import (
	"maps"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/jobraft/jobraft/wal/segment"
)

// The guard's metrics (the segment store's IO metrics are wal/segment's).
// Metrics are emitted through go-metrics, the library hashicorp/raft uses, so
// one sink sees both. Values are in base units: durations in seconds (the
// key ends in _seconds; go-metrics' own timers would be milliseconds),
// sizes in bytes. MetricHelp describes each key.
var metricHelp = map[string]string{
	"jobraft.wal.refusal": "Persist-guard refusals of the raft log store, by kind of refusal.",
	"jobraft.wal.delete":  "Log deletions by kind: compact (prefix), truncate (conflicting suffix), reset (everything).",
}

// MetricHelp returns a description of every go-metrics key the log emits
// (the guard's here, the segment store's in wal/segment), keyed by the
// dotted key (e.g. "jobraft.wal.fsync_seconds"). A new metric gets its
// entry in the package that emits it.
func MetricHelp() map[string]string {
	help := segment.MetricHelp()
	maps.Copy(help, metricHelp)
	return help
}

func countRefusal(err error) {
	if k := RefusalKind(err); k != "" {
		metrics.IncrCounterWithLabels([]string{"jobraft", "wal", "refusal"}, 1,
			[]metrics.Label{{Name: "kind", Value: k}})
	}
}

func countDelete(k deleteKind) {
	metrics.IncrCounterWithLabels([]string{"jobraft", "wal", "delete"}, 1,
		[]metrics.Label{{Name: "kind", Value: k.String()}})
}
