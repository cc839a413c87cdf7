package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// TestNoQuorumAnswered503WithinLeaderWait: with two of three jobd
// processes stopped, a POST /v1/jobs and a GET /v1/jobs/{id} on the
// survivor are answered 503 within -leader-wait (plus slack for the
// reachability round and a loaded machine), with a reason that says how
// many voters are reachable, and jobctl exits 6 (unavailable) saying the
// same; nothing was created. Once the two are back, the same requests
// succeed.
func TestNoQuorumAnswered503WithinLeaderWait(t *testing.T) {
	binaries(t)
	const leaderWait = 2 * time.Second
	const bound = leaderWait + 4*time.Second
	c, _ := startCluster(t, t.TempDir(), []string{"-leader-wait", leaderWait.String(), "-workers=false"}, nil)
	surv := c.Members[0]
	base := "http://" + surv.HTTPAddr
	if code, body := call(t, c, "POST", base+"/v1/jobs", `{"id":"before","queue":"q","kind":"echo"}`); code != http.StatusCreated {
		t.Fatalf("submit with a quorum: %d %s", code, body)
	}
	for i := 1; i < 3; i++ {
		if err := c.Stop(i, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The survivor knows no leader (a leader steps down within its lease).
	waitFor(t, "the survivor to know no leader", func() bool {
		st, err := surv.Status(context.Background())
		return err == nil && st.LeaderID == ""
	})

	const want = "no leader: 1 of 3 voters reachable"
	timed := func(what, method, url, body string, wantKind string) {
		t.Helper()
		start := time.Now()
		code, raw := call(t, c, method, url, body)
		took := time.Since(start)
		t.Logf("%s without a quorum: %d %s after %v", what, code, strings.TrimSpace(raw), took.Round(time.Millisecond))
		var e client.ErrorReply
		_ = json.Unmarshal([]byte(raw), &e)
		if code != http.StatusServiceUnavailable || e.Error != wantKind || !strings.Contains(e.Reason, want) {
			t.Errorf("%s: %d %s, want 503 %s with %q in the reason", what, code, raw, wantKind, want)
		}
		if took > bound {
			t.Errorf("%s answered after %v, want within -leader-wait %v + slack (%v)", what, took, leaderWait, bound)
		}
	}
	timed("POST /v1/jobs", "POST", base+"/v1/jobs", `{"id":"during","queue":"q","kind":"echo"}`, "not_submitted")
	timed("GET /v1/jobs/before", "GET", base+"/v1/jobs/before", "", "no_leader")

	// jobctl against the survivor: exit 6 (unavailable, nothing changed)
	// with the reason, well within its own -timeout.
	for _, args := range [][]string{
		{"submit", "-queue", "q", "-kind", "echo", "-id", "during"},
		{"get", "before"},
	} {
		start := time.Now()
		_, errs, code := jobctl(t, nil, append([]string{"-endpoints", base, "-token", c.Token, "-timeout", "60s"}, args...)...)
		took := time.Since(start)
		t.Logf("jobctl %s: exit %d after %v: %s", args[0], code, took.Round(time.Millisecond), strings.TrimSpace(errs))
		if code != exitUnavailable || !strings.Contains(errs, want) {
			t.Errorf("jobctl %s without a quorum: exit %d, %q; want %d with %q", args[0], code, errs, exitUnavailable, want)
		}
		// The client tries the one endpoint three times.
		if took > 3*bound {
			t.Errorf("jobctl %s took %v", args[0], took)
		}
	}

	for i := 1; i < 3; i++ {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, c)
	if code, body := call(t, c, "GET", base+"/v1/jobs/during", ""); code != http.StatusNotFound {
		t.Errorf("the job refused without a quorum: %d %s, want 404 (nothing was created)", code, body)
	}
	if code, body := call(t, c, "POST", base+"/v1/jobs", `{"id":"during","queue":"q","kind":"echo"}`); code != http.StatusCreated {
		t.Errorf("POST /v1/jobs with a quorum again: %d %s", code, body)
	}
	if code, body := call(t, c, "GET", base+"/v1/jobs/before", ""); code != http.StatusOK {
		t.Errorf("GET /v1/jobs/before with a quorum again: %d %s", code, body)
	}
}

// call sends one request with c's token and a client that would wait a
// minute: a route that hangs fails on its timing, not on this timeout.
func call(t *testing.T, c *cluster.Cluster, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
