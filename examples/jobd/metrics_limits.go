package main

import (
	"github.com/jobraft/jobraft"
	"github.com/prometheus/client_golang/prometheus"
)

// limitsCollector exports the queues' limits from this member's applied
// state: each concurrency limit with its running jobs, each rate's tokens,
// and the claims the limits held back (counters: replicated, so every
// member reports the same counts for the same applied index).
type limitsCollector struct {
	ctl                                  *jobraft.Controller
	limit, running, tokens, limitedTotal *prometheus.Desc
}

func newLimitsCollector(ctl *jobraft.Controller) *limitsCollector {
	return &limitsCollector{
		ctl:     ctl,
		limit:   prometheus.NewDesc("jobd_queue_limit", "Concurrency limit of a queue (kind \"\") or of a kind in it.", []string{"queue", "kind"}, nil),
		running: prometheus.NewDesc("jobd_queue_limit_running", "Jobs running under a concurrency limit of a queue (kind \"\") or of a kind in it.", []string{"queue", "kind"}, nil),
		tokens:  prometheus.NewDesc("jobd_queue_rate_tokens", "Tokens in a queue's rate bucket now (a claim leases one job per token).", []string{"queue"}, nil),
		limitedTotal: prometheus.NewDesc("jobd_limited_claims_total", "Claims a queue's limits held back (they had room for a ready job of the queue a limit kept): by concurrency (the queue's or a kind's limit) or rate.",
			[]string{"queue", "by"}, nil),
	}
}

func (c *limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.running, c.tokens, c.limitedTotal} {
		ch <- d
	}
}

func (c *limitsCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	for _, l := range c.ctl.LocalStats().Limits {
		if l.Max > 0 {
			g(c.limit, prometheus.GaugeValue, float64(l.Max), l.Queue, "")
			g(c.running, prometheus.GaugeValue, float64(l.Running), l.Queue, "")
		}
		for _, k := range l.Kinds {
			g(c.limit, prometheus.GaugeValue, float64(k.Max), l.Queue, k.Kind)
			g(c.running, prometheus.GaugeValue, float64(k.Running), l.Queue, k.Kind)
		}
		if l.Rate != nil {
			g(c.tokens, prometheus.GaugeValue, float64(l.Rate.Tokens), l.Queue)
		}
		g(c.limitedTotal, prometheus.CounterValue, float64(l.Limited), l.Queue, "concurrency")
		g(c.limitedTotal, prometheus.CounterValue, float64(l.RateLimited), l.Queue, "rate")
	}
}
