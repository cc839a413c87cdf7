package main

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/jobraft/jobraft/backup"
)

// GET /v1/cluster/backup streams a backup that verifies, with the data
// dir's cluster ID and every job.
func TestBackupRoute(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false; o.ClusterID = "cluster-a" })
	for i := 0; i < 5; i++ {
		if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": fmt.Sprintf("b%d", i), "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
	}
	r := call(t, c, "GET", d.URL()+"/v1/cluster/backup", testToken, "", nil)
	if r.code != http.StatusOK {
		t.Fatalf("backup: %d %s", r.code, r.raw)
	}
	m, err := backup.Verify(bytes.NewReader([]byte(r.raw)))
	if err != nil {
		t.Fatal(err)
	}
	if m.ClusterID != "cluster-a" || m.Jobs != 5 || m.Member != "t1" {
		t.Fatalf("manifest %+v", m)
	}
}

// Pausing a queue stops claims and shows in stats; resuming restarts them;
// both are idempotent.
func TestPauseResumeRoutes(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	for _, step := range []struct {
		path   string
		paused bool
	}{{"pause", true}, {"pause", true}, {"resume", false}, {"resume", false}} {
		r := jsonCall(t, c, d, "POST", "/v1/queues/work/"+step.path, nil)
		if r.code != http.StatusOK || r.body["paused"] != step.paused {
			t.Fatalf("%s: %d %s", step.path, r.code, r.raw)
		}
		st := jsonCall(t, c, d, "GET", "/v1/stats", nil)
		qs, _ := st.body["queues"].([]any)
		paused := len(qs) == 1 && qs[0].(map[string]any)["paused"] == true // an empty, unpaused queue is not listed
		if paused != step.paused {
			t.Fatalf("after %s: stats %s", step.path, st.raw)
		}
	}
	if r := jsonCall(t, c, d, "POST", "/v1/queues/a%01b/pause", nil); r.code != http.StatusBadRequest {
		t.Fatalf("queue name with a control character: %d %s", r.code, r.raw)
	}
}
