package main

import (
	"context"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are jobd's Prometheus metrics. Besides its own, the registry
// carries hashicorp/raft's and jobraft's go-metrics (raft_*, jobraft_raft_*,
// jobraft_wal_*) through promSink when installRaftSink was called: seconds,
// base units, peers as labels, a HELP text for every family.
type metrics struct {
	reg        *prometheus.Registry
	submit     *prometheus.HistogramVec
	refusals   *prometheus.CounterVec
	expiries   prometheus.Counter
	executions *prometheus.CounterVec
	execTime   *prometheus.HistogramVec
	requests   *prometheus.CounterVec
	dropped    prometheus.Counter
	sink       *promSink // nil until installRaftSink
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.submit = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "jobd_submit_seconds", Help: "Latency of submit requests until the jobs are committed, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"outcome"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobd_guard_refusals_total", Help: "Persist-guard refusals on this member (raft EventGuardRefusal), by error.",
	}, []string{"kind"})
	m.expiries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jobd_lease_expiries_total", Help: "Lease expiries applied by this member (every member applies the same).",
	})
	m.executions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobd_executions_total", Help: "Handler executions on this member, by handler and outcome (ok, error).",
	}, []string{"handler", "outcome"})
	m.execTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "jobd_execution_seconds", Help: "Handler run time.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"handler"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobd_http_requests_total", Help: "API requests by method, route (the path pattern) and status code.",
	}, []string{"method", "route", "code"})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jobd_gometrics_dropped_total", Help: "go-metrics values dropped because their name was already exported with another type or label set.",
	})
	m.reg.MustRegister(m.dropped, m.submit, m.refusals, m.expiries, m.executions, m.execTime, m.requests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// installRaftSink routes go-metrics (hashicorp/raft, the wal) into the
// registry. go-metrics has one global sink per process: call it once.
func (m *metrics) installRaftSink() error {
	sink := newPromSink(m.dropped)
	if err := m.reg.Register(sink); err != nil {
		return err
	}
	m.sink = sink
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableServiceLabel = false
	_, err := gometrics.NewGlobal(cfg, sink)
	return err
}

// scopeTo limits the leader-only go-metrics families (jobraft_catchup_*)
// to what node's role and configuration make current (promSink.scope).
func (m *metrics) scopeTo(node *raft.Node) {
	if m.sink == nil {
		return
	}
	m.sink.setScope(func() (bool, map[string]bool) {
		st := node.Status()
		members := make(map[string]bool, len(st.Members))
		for _, mb := range st.Members {
			members[mb.ID] = true
		}
		return st.Role == "Leader", members
	})
}

func (m *metrics) observeExecution(handler string, err error, d time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.executions.WithLabelValues(handler, outcome).Inc()
	m.execTime.WithLabelValues(handler).Observe(d.Seconds())
}

// cluster exports per-scrape gauges read from the controller: raft status,
// job counts by queue and state, and (on the leader) each member's lag.
type cluster struct {
	ctl    *jobraft.Controller
	served *servedKinds

	term, commit, applied, last, leader, diverged, logFailed *prometheus.Desc
	jobs, lag, memberApplied, up, unserved                   *prometheus.Desc
}

func newClusterCollector(ctl *jobraft.Controller, served *servedKinds) *cluster {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &cluster{
		ctl:           ctl,
		served:        served,
		term:          d("jobd_raft_term", "Current raft term."),
		commit:        d("jobd_raft_commit_index", "Commit index known to this member."),
		applied:       d("jobd_raft_applied_index", "Index applied by the job state machine."),
		last:          d("jobd_raft_last_index", "Last index in this member's log."),
		leader:        d("jobd_raft_is_leader", "1 if this member is the leader."),
		diverged:      d("jobd_raft_diverged", "1 if this member diverged from its leader's log (re-seed it; docs/node.md)."),
		logFailed:     d("jobd_raft_log_failed", "1 if this member's log failed closed after a write or fsync error or a full disk (restart it on a healthy disk)."),
		jobs:          d("jobd_jobs", "Jobs by queue and state (this member's applied state).", "queue", "state"),
		lag:           d("jobd_member_lag_entries", "Leader only: entries a member's log is behind the leader's last index.", "member"),
		memberApplied: d("jobd_member_applied_index", "Leader only: a member's applied index.", "member"),
		up:            d("jobd_member_up", "Leader only: 1 if the member answered the status RPC.", "member"),
		unserved: d("jobd_pending_unserved_jobs", "Pending jobs of a queue and kind none of whose jobs was claimed for -unserved-after while they waited, as this member observed: no worker serves the kind, or all that do are busy (a series only for such a queue and kind).",
			"queue", "kind"),
	}
}

func (c *cluster) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.commit, c.applied, c.last, c.leader, c.diverged, c.logFailed, c.jobs, c.lag, c.memberApplied, c.up, c.unserved} {
		ch <- d
	}
}

func (c *cluster) Collect(ch chan<- prometheus.Metric) {
	node := c.ctl.Node()
	st := node.Status()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.term, float64(st.Term))
	g(c.commit, float64(st.CommitIndex))
	g(c.applied, float64(st.AppliedIndex))
	g(c.last, float64(st.LastIndex))
	isLeader := 0.0
	if st.Role == "Leader" {
		isLeader = 1
	}
	g(c.leader, isLeader)
	diverged := 0.0
	if st.Diverged != nil {
		diverged = 1
	}
	g(c.diverged, diverged)
	logFailed := 0.0
	if st.LogFailed != "" {
		logFailed = 1
	}
	g(c.logFailed, logFailed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	queues := c.ctl.LocalStats().Queues
	for _, q := range queues {
		for st := jobraft.StatePending; st.Valid(); st++ {
			g(c.jobs, float64(q.Counts.Of(st)), q.Name, st.String())
		}
	}
	for _, u := range c.served.observe(queues, time.Now()) {
		g(c.unserved, float64(u.Pending), u.Queue, u.Kind)
	}
	if st.Role != "Leader" {
		return
	}
	for _, m := range memberStatuses(ctx, node, statusOf(st, true)) {
		if m.Error != "" {
			g(c.up, 0, m.ID)
			continue
		}
		g(c.up, 1, m.ID)
		g(c.lag, float64(m.Lag), m.ID)
		g(c.memberApplied, float64(m.Status.AppliedIndex), m.ID)
	}
}
