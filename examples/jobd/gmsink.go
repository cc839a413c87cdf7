package main

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// promSink is a go-metrics sink that exports hashicorp/raft's and jobraft's
// metrics with Prometheus conventions: durations in seconds as histograms
// (go-metrics' timers are milliseconds), counters ending in _total, peer IDs
// as labels (the copies of a metric with the peer ID inside its name are
// dropped) and a HELP text from gmTables for every family.
//
// It is also the prometheus.Collector that exposes them (unchecked: the
// families appear as keys are first emitted).
type promSink struct {
	table map[string]gmFamily

	mu       sync.Mutex
	families map[string]*gmSeries // by Prometheus name
	dropped  prometheus.Counter
	// scope, when set, says whether this member leads and which members
	// its configuration names: the leader-only families (leaderFamilies)
	// are exported only while it leads, and only for those members.
	scope func() (leading bool, members map[string]bool)
}

// leaderFamilies are the go-metrics families only the leader's catch-up
// monitor sets, per member. go-metrics cannot unset a gauge: without the
// scope, a member removed (or a former leader's view) would be exported
// with its last value for ever, a removed member as "lag 0".
const leaderFamilies = "jobraft_catchup_"

// shadowedKeys are go-metrics keys jobd exports itself, from the member's
// status at each scrape (jobd_raft_diverged, jobd_raft_log_failed): their
// go-metrics copies are dropped, so each family exists once.
var shadowedKeys = map[string]bool{"jobraft.raft.diverged": true, "jobraft.raft.log_failed": true}

func (s *promSink) setScope(scope func() (bool, map[string]bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scope = scope
}

type gmKind int

const (
	gmCounter gmKind = iota
	gmGauge
	gmHistogram
)

// gmSeries is one exported family.
type gmSeries struct {
	help   string
	kind   gmKind
	labels []string // label names, sorted
	bounds []float64
	values map[string]*gmValue // by label values joined with \xff
}

type gmValue struct {
	labels  []string
	v       float64  // counter or gauge
	count   uint64   // histogram
	sum     float64  // histogram
	buckets []uint64 // histogram, non-cumulative per bound
}

func newPromSink(dropped prometheus.Counter) *promSink {
	return &promSink{table: gmTables(), families: map[string]*gmSeries{}, dropped: dropped}
}

var _ gometrics.MetricSink = (*promSink)(nil)
var _ prometheus.Collector = (*promSink)(nil)

func (s *promSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }
func (s *promSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.record(key, gmGauge, float64(val), labels)
}

// EmitKey is unused by hashicorp/raft and jobraft: ignored.
func (s *promSink) EmitKey([]string, float32) {}

func (s *promSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }
func (s *promSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.record(key, gmCounter, float64(val), labels)
}

func (s *promSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }
func (s *promSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.record(key, gmHistogram, float64(val), labels)
}

// family finds how key is exported; ok is false for a key to drop.
func (s *promSink) family(key []string, kind gmKind) (gmFamily, bool) {
	dotted := strings.Join(key, ".")
	if shadowedKeys[dotted] {
		return gmFamily{}, false
	}
	if f, ok := s.table[dotted]; ok {
		if kind == gmCounter && !strings.HasSuffix(f.name, "_total") {
			f.name += "_total"
		}
		return f, true
	}
	if len(key) > 1 && slices.Contains(raftPeerKeys, strings.Join(key[:len(key)-1], ".")) {
		return gmFamily{}, false
	}
	f := gmFamily{name: promName(dotted), help: gmUndocumented + dotted + " (add it to examples/jobd/gmnames.go or the emitting package's MetricHelp)."}
	if kind == gmCounter {
		f.name += "_total"
	}
	return f, true
}

func (s *promSink) record(key []string, kind gmKind, val float64, labels []gometrics.Label) {
	f, ok := s.family(key, kind)
	if !ok {
		return
	}
	if f.scale != 0 {
		val *= f.scale
	}
	names := make([]string, 0, len(labels)+len(f.fixed))
	byName := make(map[string]string, cap(names))
	for _, l := range labels {
		n := l.Name
		if r, ok := gmLabelNames[n]; ok {
			n = r
		}
		n = promName(n)
		names = append(names, n)
		byName[n] = l.Value
	}
	for n, v := range f.fixed {
		names = append(names, n)
		byName[n] = v
	}
	sort.Strings(names)
	values := make([]string, len(names))
	for i, n := range names {
		values[i] = byName[n]
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	fam := s.families[f.name]
	if fam == nil {
		fam = &gmSeries{help: f.help, kind: kind, labels: names, values: map[string]*gmValue{}}
		if kind == gmHistogram {
			fam.bounds = bucketsFor(f.name)
		}
		s.families[f.name] = fam
	}
	if fam.kind != kind || !slices.Equal(fam.labels, names) {
		s.dropped.Inc() // the same name emitted two ways: keep the first
		return
	}
	id := strings.Join(values, "\xff")
	v := fam.values[id]
	if v == nil {
		v = &gmValue{labels: values}
		if kind == gmHistogram {
			v.buckets = make([]uint64, len(fam.bounds))
		}
		fam.values[id] = v
	}
	switch kind {
	case gmCounter:
		v.v += val
	case gmGauge:
		v.v = val
	case gmHistogram:
		v.count++
		v.sum += val
		if i := sort.SearchFloat64s(fam.bounds, val); i < len(fam.bounds) {
			v.buckets[i]++
		}
	}
}

// bucketsFor chooses histogram bounds by unit: seconds from 50µs to ~13 s,
// ratios in tenths, counts and bytes in powers of four.
func bucketsFor(name string) []float64 {
	switch {
	case strings.HasSuffix(name, "_seconds"):
		return prometheus.ExponentialBuckets(0.00005, 4, 10)
	case strings.HasSuffix(name, "_ratio"):
		return prometheus.LinearBuckets(0.1, 0.1, 10)
	default:
		return prometheus.ExponentialBuckets(1, 4, 12)
	}
}

// Describe sends nothing: the sink is an unchecked collector.
func (s *promSink) Describe(chan<- *prometheus.Desc) {}

// Collect exports every family as it is now.
func (s *promSink) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	scope := s.scope
	s.mu.Unlock()
	leading, members := true, map[string]bool(nil)
	if scope != nil {
		leading, members = scope() // outside the lock: it reads the node's status
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, fam := range s.families {
		desc := prometheus.NewDesc(name, fam.help, fam.labels, nil)
		leaderOnly := strings.HasPrefix(name, leaderFamilies) && fam.kind == gmGauge
		if leaderOnly && !leading {
			clear(fam.values) // a former leader's view; set again when it leads
			continue
		}
		member := slices.Index(fam.labels, "member")
		for id, v := range fam.values {
			if leaderOnly && members != nil && member >= 0 && !members[v.labels[member]] {
				delete(fam.values, id) // a member no longer in the configuration
				continue
			}
			switch fam.kind {
			case gmCounter:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v.v, v.labels...)
			case gmGauge:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v.v, v.labels...)
			case gmHistogram:
				cum := make(map[float64]uint64, len(fam.bounds))
				var n uint64
				for i, b := range fam.bounds {
					n += v.buckets[i]
					cum[b] = n
				}
				sum := v.sum
				if math.IsNaN(sum) {
					sum = 0
				}
				ch <- prometheus.MustNewConstHistogram(desc, v.count, sum, cum, v.labels...)
			}
		}
	}
}
