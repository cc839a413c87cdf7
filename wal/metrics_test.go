package wal

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/raft"
)

// Refusals are counted by kind, and batches and fsyncs are measured, in the
// go-metrics sink hashicorp/raft reports to.
func TestMetricsCountRefusalsAndBatches(t *testing.T) {
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	cfg := metrics.DefaultConfig("test")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { metrics.NewGlobal(cfg, &metrics.BlackholeSink{}) })
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustStore(t, l, stamped(1, 1, "a"), stamped(2, 1, "b"))
	guardErr(t, l.StoreLogs([]*raft.Log{stamped(2, 1, "b")}), ErrOverwrite)
	guardErr(t, l.StoreLogs([]*raft.Log{stamped(3, 0, "c")}), ErrZeroTerm)

	data := sink.Data()
	if len(data) == 0 {
		t.Fatal("no metrics")
	}
	counters, samples := data[0].Counters, data[0].Samples
	for _, kind := range []string{"overwrite", "zero_term"} {
		key := "test.jobraft.wal.refusal;kind=" + kind
		if c, ok := counters[key]; !ok || c.Count != 1 {
			t.Fatalf("counter %s: %+v (have %v)", key, c, keys(counters))
		}
	}
	if s, ok := samples["test.jobraft.wal.batch_entries"]; !ok || s.Sum != 2 {
		t.Fatalf("batch_entries: %+v", s)
	}
	// Durations are in seconds: a loopback fsync takes well under a minute.
	if s, ok := samples["test.jobraft.wal.fsync_seconds"]; !ok || s.Count < 1 || s.Max > 60 {
		t.Fatalf("fsync_seconds: %+v", s)
	}
	// Every key emitted has its description (labels follow ';').
	help := MetricHelp()
	for _, m := range []map[string]metrics.SampledValue{counters, samples} {
		for k := range m {
			key := strings.TrimPrefix(strings.SplitN(k, ";", 2)[0], "test.")
			if help[key] == "" {
				t.Errorf("%s has no MetricHelp entry", key)
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
