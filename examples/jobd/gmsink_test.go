package main

import (
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
)

// promSink converts go-metrics' milliseconds to seconds, drops the copies
// of a metric that carry the peer ID in their name, renames peer_id to
// peer, names counters _total and gives every family its HELP.
func TestPromSinkConventions(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newPromSink(prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped_total", Help: "dropped"}))
	reg.MustRegister(s)
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	s.AddSampleWithLabels([]string{"raft", "replication", "heartbeat"}, 250, peer) // 250 ms
	s.AddSample([]string{"raft", "replication", "heartbeat", "n2"}, 250)           // legacy copy
	s.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 3, peer)
	s.IncrCounter([]string{"raft", "replication", "appendEntries", "logs", "n2"}, 3)
	s.IncrCounter([]string{"raft", "state", "leader"}, 1)
	s.AddSample([]string{"jobraft", "wal", "fsync_seconds"}, 0.002)
	s.IncrCounterWithLabels([]string{"jobraft", "wal", "refusal"}, 1, []gometrics.Label{{Name: "kind", Value: "overwrite"}})

	want := `
# HELP jobraft_wal_refusal_total Persist-guard refusals of the raft log store, by kind of refusal.
# TYPE jobraft_wal_refusal_total counter
jobraft_wal_refusal_total{kind="overwrite"} 1
# HELP raft_replication_entries_total Entries the leader sent to a peer, by peer.
# TYPE raft_replication_entries_total counter
raft_replication_entries_total{peer="n2"} 3
# HELP raft_state_changes_total Transitions of this member into a raft state, by state.
# TYPE raft_state_changes_total counter
raft_state_changes_total{state="leader"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"jobraft_wal_refusal_total", "raft_replication_entries_total", "raft_state_changes_total"); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if strings.Contains(f.GetName(), "n2") {
			t.Errorf("family %s carries the peer ID", f.GetName())
		}
		if f.GetName() == "raft_replication_heartbeat_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.25 {
				t.Errorf("heartbeat: count %d sum %g, want 1 and 0.25 (seconds)", h.GetSampleCount(), h.GetSampleSum())
			}
			if l := f.GetMetric()[0].GetLabel(); len(l) != 1 || l[0].GetName() != "peer" || l[0].GetValue() != "n2" {
				t.Errorf("heartbeat labels %v", l)
			}
		}
	}
	for _, n := range []string{"raft_replication_heartbeat_seconds", "jobraft_wal_fsync_seconds"} {
		if !names[n] {
			t.Errorf("no family %s in %v", n, names)
		}
	}
	if len(names) != 5 {
		t.Errorf("families %v, want 5 (legacy per-peer copies dropped)", names)
	}
}

// Every key in the tables maps to a valid name with a real HELP; samples
// of the same family with different label sets are dropped, not mixed.
func TestPromSinkTables(t *testing.T) {
	for key, f := range gmTables() {
		if !model.LegacyValidation.IsValidMetricName(f.name) {
			t.Errorf("%s: invalid name %q", key, f.name)
		}
		if f.help == "" || f.help == f.name {
			t.Errorf("%s: no HELP", key)
		}
	}
	if got := promName("raft.fsm.applyBatchNum"); got != "raft_fsm_apply_batch_num" {
		t.Errorf("promName: %s", got)
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "d_total", Help: "d"})
	s := newPromSink(dropped)
	s.IncrCounterWithLabels([]string{"jobraft", "wal", "delete"}, 1, []gometrics.Label{{Name: "kind", Value: "compact"}})
	s.IncrCounter([]string{"jobraft", "wal", "delete"}, 1)
	if v := testutil.ToFloat64(dropped); v != 1 {
		t.Errorf("dropped %g, want 1", v)
	}
}

// The leader-only catch-up families are exported only while the member
// leads, and only for members its configuration names (go-metrics cannot
// unset a gauge: a removed member stayed "lag 0" for ever); the keys jobd
// exports itself (diverged, log_failed) are not exported a second time.
func TestPromSinkScopesLeaderFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newPromSink(prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped_total", Help: "dropped"}))
	reg.MustRegister(s)
	leading, members := true, map[string]bool{"n1": true, "n2": true, "n3": true}
	s.setScope(func() (bool, map[string]bool) { return leading, members })
	for _, m := range []string{"n1", "n2", "n3"} {
		s.SetGaugeWithLabels([]string{"jobraft", "catchup", "lag_entries"}, 0, []gometrics.Label{{Name: "member", Value: m}})
	}
	s.SetGaugeWithLabels([]string{"jobraft", "raft", "diverged"}, 0, []gometrics.Label{{Name: "member", Value: "n1"}})
	s.SetGaugeWithLabels([]string{"jobraft", "raft", "log_failed"}, 0, []gometrics.Label{{Name: "member", Value: "n1"}})
	lagged := func() []string {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fams {
			switch f.GetName() {
			case "jobraft_raft_diverged", "jobraft_raft_log_failed":
				t.Errorf("%s exported: jobd exports it as jobd_raft_*", f.GetName())
			case "jobraft_catchup_lag_entries":
				for _, m := range f.GetMetric() {
					out = append(out, m.GetLabel()[0].GetValue())
				}
			}
		}
		return out
	}
	if got := strings.Join(lagged(), ","); got != "n1,n2,n3" {
		t.Fatalf("lag series %s, want n1,n2,n3", got)
	}
	members = map[string]bool{"n1": true, "n2": true} // n3 removed
	if got := strings.Join(lagged(), ","); got != "n1,n2" {
		t.Fatalf("lag series after n3's removal: %s, want n1,n2", got)
	}
	leading = false
	if got := lagged(); len(got) != 0 {
		t.Fatalf("lag series on a member that no longer leads: %v", got)
	}
}
