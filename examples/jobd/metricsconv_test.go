package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	jobdcluster "github.com/jobraft/jobraft/examples/internal/cluster"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsFollowPrometheusConventions scrapes /metrics of a live
// 3-member cluster's leader and a follower after some work and checks the
// exposition: it parses strictly; no family name carries a member's ID or
// address (peers are labels); every family has a HELP text that is not its
// name and is not the undocumented-key fallback; duration families end in
// _seconds and go-metrics' families are histograms, counters or gauges
// (not millisecond summaries); the leader's replication timings are
// labelled by peer with the followers' IDs.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	c := liveCluster(t)
	ctx := context.Background()
	leader := leaderOf(t, c)
	var jobs []client.SubmitRequest
	for i := range 20 {
		jobs = append(jobs, client.SubmitRequest{ID: fmt.Sprintf("m-%d", i), Queue: "q", Kind: "k", Payload: []byte("x")})
	}
	if _, err := c.Members[leader].Client.SubmitBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	var followers []string
	for i, m := range c.Members {
		if i != leader {
			followers = append(followers, m.ID)
		}
	}
	// The leader's replication timings appear once heartbeats and appends
	// ran to both followers.
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		fams = scrape(t, c, leader)
		if peersOf(fams["raft_replication_append_entries_seconds"]) == strings.Join(followers, ",") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("raft_replication_append_entries_seconds not labelled with both followers %v: %v",
				followers, fams["raft_replication_append_entries_seconds"])
		}
		<-tick.C
	}
	checkConventions(t, c, "leader", fams)
	if testing.Verbose() {
		for name, f := range fams {
			t.Logf("%s %s: %s", name, f.GetType(), f.GetHelp())
		}
	}
	checkConventions(t, c, "follower", scrape(t, c, (leader+1)%3))
	for _, name := range []string{"raft_fsm_apply_batch_seconds", "jobraft_wal_fsync_seconds", "raft_commit_time_seconds"} {
		if f := fams[name]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("leader: %s missing or not a histogram: %v", name, f)
		}
	}
}

var milli = regexp.MustCompile(`(^|_)(ms|millis|milliseconds)(_|$)`)

var durationWord = regexp.MustCompile(`(^|_)(duration|time|latency|elapsed|ms|millis|milliseconds|seconds|age|lastcontact|last_contact)(_|$)`)

func checkConventions(t *testing.T, c *jobdcluster.Cluster, who string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var forbidden []string
	for _, m := range c.Members {
		forbidden = append(forbidden, m.ID, sanitize(m.RaftAddr), sanitize(m.HTTPAddr), portOf(m.RaftAddr), portOf(m.HTTPAddr))
	}
	for name, f := range fams {
		parts := strings.Split(name, "_")
		for _, bad := range forbidden {
			if slices.Contains(parts, bad) || strings.Contains(name, bad) && strings.Contains(bad, "_") {
				t.Errorf("%s: family %s carries a member ID or address (%s) in its name", who, name, bad)
			}
		}
		help := f.GetHelp()
		if help == "" || help == name || strings.HasPrefix(help, gmUndocumented) {
			t.Errorf("%s: family %s has no real HELP: %q", who, name, help)
		}
		base := strings.TrimSuffix(name, "_total")
		if durationWord.MatchString(promName(base)) && !strings.HasSuffix(base, "_seconds") {
			t.Errorf("%s: duration family %s does not end in _seconds", who, name)
		}
		if milli.MatchString(name) {
			t.Errorf("%s: family %s is in milliseconds", who, name)
		}
		if (strings.HasPrefix(name, "raft_") || strings.HasPrefix(name, "jobraft_")) && f.GetType() == dto.MetricType_SUMMARY {
			t.Errorf("%s: family %s is a summary (go-metrics' default), not a histogram", who, name)
		}
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("%s: counter %s does not end in _total", who, name)
		}
	}
	if len(fams) < 30 {
		t.Errorf("%s: only %d families", who, len(fams))
	}
}

func sanitize(addr string) string { return strings.NewReplacer(".", "_", ":", "_").Replace(addr) }

func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// peersOf lists a family's peer label values, sorted, comma-joined.
func peersOf(f *dto.MetricFamily) string {
	var out []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "peer" && !slices.Contains(out, l.GetValue()) {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// scrape reads member i's /metrics and parses it with the strict (legacy
// name) text parser.
func scrape(t *testing.T, c *jobdcluster.Cluster, i int) map[string]*dto.MetricFamily {
	t.Helper()
	m := c.Members[i]
	req, _ := http.NewRequest("GET", "http://"+m.HTTPAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("%s /metrics does not parse: %v", m.ID, err)
	}
	return fams
}
