package segment

import (
	"maps"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// The store's IO metrics (the guard's are package wal's). Metrics are emitted through go-metrics, the library hashicorp/raft uses, so
// one sink sees both. Values are in base units: durations in seconds (the
// key ends in _seconds; go-metrics' own timers would be milliseconds),
// sizes in bytes. MetricHelp describes each key.
var metricHelp = map[string]string{
	"jobraft.wal.fsync_seconds": "Time to fsync one batch of log entries, in seconds.",
	"jobraft.wal.batch_entries": "Entries per StoreLogs call (one fsync each).",
	"jobraft.wal.batch_bytes":   "Bytes of entry data per StoreLogs call.",
}

// MetricHelp returns a description of every go-metrics key this package
// emits, keyed by the dotted key (e.g. "jobraft.wal.fsync_seconds"). A new
// metric gets its entry here; wal.MetricHelp includes these.
func MetricHelp() map[string]string { return maps.Clone(metricHelp) }

func measureFsync(start time.Time) {
	metrics.AddSample([]string{"jobraft", "wal", "fsync_seconds"}, float32(time.Since(start).Seconds()))
}

func sampleBatch(entries, bytes int) {
	metrics.AddSample([]string{"jobraft", "wal", "batch_entries"}, float32(entries))
	metrics.AddSample([]string{"jobraft", "wal", "batch_bytes"}, float32(bytes))
}
