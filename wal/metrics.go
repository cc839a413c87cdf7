package wal

import (
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// Metrics are emitted through go-metrics, the library hashicorp/raft uses, so
// one sink sees both:
//
//	jobraft.wal.refusal{kind}    counter, every guard refusal by kind
//	jobraft.wal.fsync            timer (ms), each batch's fsync
//	jobraft.wal.batch_entries    sample, entries per StoreLogs
//	jobraft.wal.batch_bytes      sample, bytes per StoreLogs
//	jobraft.wal.delete{kind}     counter, compactions, truncations, resets

func countRefusal(err error) {
	if k := RefusalKind(err); k != "" {
		metrics.IncrCounterWithLabels([]string{"jobraft", "wal", "refusal"}, 1,
			[]metrics.Label{{Name: "kind", Value: k}})
	}
}

func measureFsync(start time.Time) {
	metrics.MeasureSince([]string{"jobraft", "wal", "fsync"}, start)
}

func sampleBatch(entries, bytes int) {
	metrics.AddSample([]string{"jobraft", "wal", "batch_entries"}, float32(entries))
	metrics.AddSample([]string{"jobraft", "wal", "batch_bytes"}, float32(bytes))
}

func countDelete(k deleteKind) {
	metrics.IncrCounterWithLabels([]string{"jobraft", "wal", "delete"}, 1,
		[]metrics.Label{{Name: "kind", Value: k.String()}})
}
