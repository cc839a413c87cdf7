package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// walSink is a go-metrics sink that keeps what the log's writer reports
// (wal/segment's metrics) while a window runs: how many fsyncs, how long
// they took, how many entries each carried. It tells a window bound by the
// disk (few, slow fsyncs) from one bound by the CPU.
type walSink struct {
	mu      sync.Mutex
	on      bool
	fsyncs  int64
	sum     float64 // seconds
	max     float64
	entries float64
}

var walStats = &walSink{}

func init() {
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
	_, _ = metrics.NewGlobal(cfg, walStats)
}

// walFigures is what the sink kept over one window.
type walFigures struct {
	Fsyncs    int64
	FsyncMean time.Duration
	FsyncMax  time.Duration
	Entries   float64 // entries per fsync
}

func (s *walSink) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.fsyncs, s.sum, s.max, s.entries = true, 0, 0, 0, 0
}

func (s *walSink) stop() walFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	f := walFigures{Fsyncs: s.fsyncs, FsyncMax: time.Duration(s.max * float64(time.Second))}
	if s.fsyncs > 0 {
		f.FsyncMean = time.Duration(s.sum / float64(s.fsyncs) * float64(time.Second))
		f.Entries = s.entries / float64(s.fsyncs)
	}
	return f
}

func (s *walSink) AddSample(key []string, val float32) {
	k := strings.Join(key, ".")
	if !strings.HasPrefix(k, "jobraft.wal.") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	switch k {
	case "jobraft.wal.fsync_seconds":
		s.fsyncs++
		s.sum += float64(val)
		s.max = max(s.max, float64(val))
	case "jobraft.wal.batch_entries":
		s.entries += float64(val)
	}
}

func (s *walSink) AddSampleWithLabels(key []string, val float32, _ []metrics.Label) {
	s.AddSample(key, val)
}
func (*walSink) SetGauge([]string, float32)                               {}
func (*walSink) SetGaugeWithLabels([]string, float32, []metrics.Label)    {}
func (*walSink) EmitKey([]string, float32)                                {}
func (*walSink) IncrCounter([]string, float32)                            {}
func (*walSink) IncrCounterWithLabels([]string, float32, []metrics.Label) {}

func (f walFigures) String() string {
	return fmt.Sprintf("log writes: %d fsyncs (mean %v, max %v), %.1f entries each", f.Fsyncs, f.FsyncMean.Round(time.Microsecond), f.FsyncMax.Round(time.Microsecond), f.Entries)
}
