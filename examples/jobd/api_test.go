package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

const testToken = "test-token-0123456789"

// startTest runs a one-member jobd in-process on loopback ports.
func startTest(t *testing.T, tweak func(*options)) (*daemon, *http.Client) {
	t.Helper()
	o := defaults()
	o.ID, o.DataDir, o.Token = "t1", t.TempDir(), testToken
	o.RaftAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Heartbeat, o.Election = 200*time.Millisecond, 200*time.Millisecond
	o.Queues, o.Workers = "work=2", true
	o.MaxBody = 4096
	o.ShutdownGrace = 5 * time.Second
	if tweak != nil {
		tweak(&o)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	d, err := start(context.Background(), o, newMetrics(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.shutdown(o.ShutdownGrace); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	client := &http.Client{Timeout: 10 * time.Second}
	if o.APICert == "" {
		waitReady(t, d, client) // TLS callers wait with a client that trusts their CA
	}
	return d, client
}

// waitReady polls /readyz until 200 or a deadline.
func waitReady(t *testing.T, d *daemon, c *http.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if resp, err := c.Get(d.URL() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		<-tick.C
	}
	t.Fatal("jobd not ready within 20s")
}

type reply struct {
	code int
	body map[string]any
	raw  string
}

func call(t *testing.T, c *http.Client, method, url, token, ctype string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{code: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &r.body)
	return r
}

func jsonCall(t *testing.T, c *http.Client, d *daemon, method, path string, body any) reply {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	return call(t, c, method, d.URL()+path, testToken, "application/json", b)
}

var apiRoutes = [][2]string{
	{"POST", "/v1/jobs"}, {"POST", "/v1/jobs/batch"}, {"GET", "/v1/jobs?queue=work"}, {"GET", "/v1/jobs/x"},
	{"POST", "/v1/jobs/x/cancel"}, {"POST", "/v1/jobs/x/retry"}, {"POST", "/v1/jobs/x/ack"}, {"POST", "/v1/jobs/x/nak"},
	{"POST", "/v1/jobs/x/extend"}, {"POST", "/v1/jobs/x/term"}, {"POST", "/v1/claim"}, {"GET", "/v1/stats"},
	{"GET", "/v1/watch"}, {"GET", "/v1/cluster/status"}, {"GET", "/v1/cluster/walcompare"}, {"GET", "/metrics"},
	{"GET", "/v1/cluster/backup"}, {"POST", "/v1/queues/work/pause"}, {"POST", "/v1/queues/work/resume"},
	{"POST", "/v1/batches"}, {"GET", "/v1/batches"}, {"GET", "/v1/batches/b"}, {"GET", "/v1/jobs/x/dependents"},
	{"POST", "/v1/schedules"}, {"GET", "/v1/schedules"}, {"GET", "/v1/schedules/s"}, {"POST", "/v1/schedules/s/pause"},
	{"POST", "/v1/schedules/s/resume"}, {"DELETE", "/v1/schedules/s"},
	{"POST", "/v1/queues/work/limit"}, {"DELETE", "/v1/queues/work/limit"}, {"POST", "/v1/queues/work/rate"},
	{"DELETE", "/v1/queues/work/rate"}, {"GET", "/v1/limits"}, {"GET", "/v1/nope"},
}

func TestAuthRequiredOnEveryRoute(t *testing.T) {
	d, c := startTest(t, nil)
	body := []byte(`{"queue":"work","kind":"echo","payload_text":"x"}`)
	for _, rt := range apiRoutes {
		for _, tok := range []string{"", "wrong-token-0123456789", testToken + "x"} {
			r := call(t, c, rt[0], d.URL()+rt[1], tok, "application/json", body)
			if r.code != http.StatusUnauthorized || r.body["error"] != "unauthorized" || r.body["reason"] == "" {
				t.Errorf("%s %s token %q: got %d %s, want 401 with a reason", rt[0], rt[1], tok, r.code, r.raw)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := call(t, c, "GET", d.URL()+p, "", "", nil); r.code != http.StatusOK {
			t.Errorf("%s without token: %d, want 200 (probes are open)", p, r.code)
		}
	}
	if n := jobCount(t, c, d); n != 0 {
		t.Fatalf("unauthenticated requests created %d jobs", n)
	}
}

// jobCount is the number of jobs in every queue (linearizable stats).
func jobCount(t *testing.T, c *http.Client, d *daemon) int {
	t.Helper()
	r := jsonCall(t, c, d, "GET", "/v1/stats", nil)
	if r.code != http.StatusOK {
		t.Fatalf("stats: %d %s", r.code, r.raw)
	}
	return int(r.body["jobs"].(float64))
}

func TestBadRequestsRefusedWithReasonAndChangeNothing(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	big := `{"queue":"work","kind":"echo","payload_text":"` + strings.Repeat("a", 5000) + `"}`
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
	}{
		{"malformed json", "POST", "/v1/jobs", "application/json", `{"queue":`, 400},
		{"not an object", "POST", "/v1/jobs", "application/json", `[1,2]`, 400},
		{"trailing data", "POST", "/v1/jobs", "application/json", `{"queue":"work","kind":"echo"} {}`, 400},
		{"unknown field", "POST", "/v1/jobs", "application/json", `{"queue":"work","kind":"echo","bogus":1}`, 400},
		{"empty body", "POST", "/v1/jobs", "application/json", ``, 400},
		{"missing queue", "POST", "/v1/jobs", "application/json", `{"kind":"echo"}`, 400},
		{"both payloads", "POST", "/v1/jobs", "application/json", `{"queue":"work","kind":"echo","payload":"eA==","payload_text":"x"}`, 400},
		{"bad base64", "POST", "/v1/jobs", "application/json", `{"queue":"work","kind":"echo","payload":"%%%"}`, 400},
		{"bad delay", "POST", "/v1/jobs", "application/json", `{"queue":"work","kind":"echo","delay":"soon"}`, 400},
		{"reserved id", "POST", "/v1/jobs", "application/json", `{"id":"@x","queue":"work","kind":"echo"}`, 400},
		{"form content type", "POST", "/v1/jobs", "application/x-www-form-urlencoded", `queue=work`, 415},
		{"oversize body", "POST", "/v1/jobs", "application/json", big, 413},
		{"empty batch", "POST", "/v1/jobs/batch", "application/json", `{"jobs":[]}`, 400},
		{"batch with a bad job", "POST", "/v1/jobs/batch", "application/json", `{"jobs":[{"queue":"work","kind":"echo"},{"kind":"echo"}]}`, 400},
		{"claim without queues", "POST", "/v1/claim", "application/json", `{"worker":"w"}`, 400},
		{"claim without worker", "POST", "/v1/claim", "application/json", `{"queues":["work"]}`, 400},
		{"claim wait too long", "POST", "/v1/claim", "application/json", `{"queues":["work"],"worker":"w","wait":"2h"}`, 400},
		{"claim max too large", "POST", "/v1/claim", "application/json", `{"queues":["work"],"worker":"w","max":100000}`, 400},
		{"ack without token", "POST", "/v1/jobs/x/ack", "application/json", `{}`, 400},
		{"ack unknown job", "POST", "/v1/jobs/nope/ack", "application/json", `{"token":5}`, 404},
		{"list bad state", "GET", "/v1/jobs?queue=work&state=sleeping", "", ``, 400},
		{"list bad limit", "GET", "/v1/jobs?queue=work&limit=-1", "", ``, 400},
		{"get bad consistency", "GET", "/v1/jobs/x?consistency=eventual", "", ``, 400},
		{"watch bad from", "GET", "/v1/watch?from=abc", "", ``, 400},
		{"cancel unknown job", "POST", "/v1/jobs/nope/cancel", "application/json", `{}`, 404},
		{"retry unknown job", "POST", "/v1/jobs/nope/retry", "", ``, 404},
		{"unknown route", "GET", "/v1/nope", "", ``, 404},
	}
	for _, tc := range cases {
		r := call(t, c, tc.method, d.URL()+tc.path, testToken, tc.ctype, []byte(tc.body))
		if r.code != tc.code || r.body["error"] == nil || r.body["reason"] == "" || r.body["reason"] == nil {
			t.Errorf("%s: got %d %s, want %d with {error, reason}", tc.name, r.code, r.raw, tc.code)
		}
	}
	if n := jobCount(t, c, d); n != 0 {
		t.Fatalf("refused requests created %d jobs", n)
	}
}

func TestSubmitClaimAckAndStaleToken(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "j1", "queue": "work", "kind": "echo", "payload_text": "hi"})
	if r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "j1", "queue": "work", "kind": "echo", "payload_text": "hi"}); r.code != http.StatusOK || r.body["duplicate"] != true {
		t.Fatalf("resubmit: %d %s, want 200 duplicate", r.code, r.raw)
	}
	r = jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "w1", "wait": "5s"})
	leases, _ := r.body["leases"].([]any)
	if r.code != http.StatusOK || len(leases) != 1 {
		t.Fatalf("claim: %d %s", r.code, r.raw)
	}
	token := leases[0].(map[string]any)["token"].(float64)
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/ack", map[string]any{"token": token + 1000, "result_text": "no"}); r.code != http.StatusConflict || r.body["error"] != "stale_lease" {
		t.Fatalf("ack with a wrong token: %d %s, want 409 stale_lease", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/extend", map[string]any{"token": token}); r.code != http.StatusOK {
		t.Fatalf("extend: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/ack", map[string]any{"token": token, "result_text": "done"}); r.code != http.StatusOK {
		t.Fatalf("ack: %d %s", r.code, r.raw)
	}
	// A client retrying its ack (its first answer lost) gets 200 again;
	// an ack by that token with another result, and a nak by it, are
	// stale, saying how the lease ended, and the first ack's result stands.
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/ack", map[string]any{"token": token, "result_text": "done"}); r.code != http.StatusOK {
		t.Fatalf("repeated ack: %d %s, want 200", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/ack", map[string]any{"token": token, "result_text": "again"}); r.code != http.StatusConflict ||
		r.body["error"] != "stale_lease" || !strings.Contains(fmt.Sprint(r.body["reason"]), "ended: acked") || strings.Contains(r.raw, "again") {
		t.Fatalf("ack with another result: %d %s, want 409 stale_lease saying the lease ended acked, quoting no result", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/jobs/j1/nak", map[string]any{"token": token, "error": "late"}); r.code != http.StatusConflict || r.body["error"] != "stale_lease" {
		t.Fatalf("nak after the ack: %d %s, want 409 stale_lease", r.code, r.raw)
	}
	r = jsonCall(t, c, d, "GET", "/v1/jobs/j1", nil)
	if r.code != http.StatusOK || r.body["state"] != "succeeded" || r.body["result"] != "ZG9uZQ==" {
		t.Fatalf("get: %d %s", r.code, r.raw)
	}
}

// An ack by an older lease of a job that a newer lease finished stays 409
// (fencing), while the newer lease's repeated ack is 200.
func TestRepeatedAckByOlderLeaseIsStale(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "j2", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	claim := func() float64 {
		t.Helper()
		r := jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "w", "wait": "5s"})
		leases, _ := r.body["leases"].([]any)
		if r.code != http.StatusOK || len(leases) != 1 {
			t.Fatalf("claim: %d %s", r.code, r.raw)
		}
		return leases[0].(map[string]any)["token"].(float64)
	}
	t1 := claim()
	if r := jsonCall(t, c, d, "POST", "/v1/jobs/j2/nak", map[string]any{"token": t1, "delay": "1ns", "error": "boom"}); r.code != http.StatusOK {
		t.Fatalf("nak: %d %s", r.code, r.raw)
	}
	t2 := claim()
	for k := 0; k < 2; k++ {
		if r := jsonCall(t, c, d, "POST", "/v1/jobs/j2/ack", map[string]any{"token": t2, "result_text": "ok"}); r.code != http.StatusOK {
			t.Fatalf("ack %d by the current lease: %d %s", k, r.code, r.raw)
		}
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs/j2/ack", map[string]any{"token": t1, "result_text": "late"}); r.code != http.StatusConflict || r.body["error"] != "stale_lease" {
		t.Fatalf("ack by the older lease: %d %s, want 409 stale_lease", r.code, r.raw)
	}
}

// The HTTP mapping: "may have happened" is 503 outcome_unknown even for an
// error that also claims a refusal class (the shape the controller used
// to return for an ack retried stale after an unknown attempt), a stale
// lease 409, nothing-happened classes their 4xx or 503.
func TestClassifyOutcomes(t *testing.T) {
	stale := fmt.Errorf("%w: %w: token 5", jobraft.ErrStaleLease, fsm.ErrStaleLease)
	cases := []struct {
		err  error
		code int
		kind string
	}{
		{fmt.Errorf("%w: %w: %w", jobraft.ErrOutcomeUnknown, raft.ErrIndeterminate, stale), http.StatusServiceUnavailable, "outcome_unknown"},
		{fmt.Errorf("%w: %w", jobraft.ErrOutcomeUnknown, raft.ErrIndeterminate), http.StatusServiceUnavailable, "outcome_unknown"},
		{fmt.Errorf("x: %w", raft.ErrIndeterminate), http.StatusServiceUnavailable, "outcome_unknown"},
		{&jobraft.SubmitError{ID: "a", Class: jobraft.ErrMayExist, Cause: context.Canceled}, http.StatusServiceUnavailable, "outcome_unknown"},
		{stale, http.StatusConflict, "stale_lease"},
		{fmt.Errorf("%w", jobraft.ErrInvalidState), http.StatusConflict, "invalid_state"},
		{fmt.Errorf("%w", jobraft.ErrQueuePaused), http.StatusConflict, "queue_paused"},
		{fmt.Errorf("%w", jobraft.ErrNotFound), http.StatusNotFound, "not_found"},
		{fmt.Errorf("%w", jobraft.ErrInvalidRequest), http.StatusBadRequest, "invalid"},
		{fmt.Errorf("%w: %w", jobraft.ErrNotApplied, context.DeadlineExceeded), http.StatusServiceUnavailable, "not_applied"},
		{&jobraft.SubmitError{ID: "a", Class: jobraft.ErrNotSubmitted, Cause: context.Canceled}, http.StatusServiceUnavailable, "not_submitted"},
		{jobraft.ErrClosed, http.StatusServiceUnavailable, "closed"},
		{&jobraft.CompactedError{From: 1, Oldest: 5}, http.StatusGone, "compacted"},
	}
	for _, c := range cases {
		if code, kind, _ := classify(c.err, ""); code != c.code || kind != c.kind {
			t.Errorf("%v: %d %s, want %d %s", c.err, code, kind, c.code, c.kind)
		}
	}
}

func TestBuiltinWorkerRunsJobs(t *testing.T) {
	d, c := startTest(t, nil)
	r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "h1", "queue": "work", "kind": "sha256", "payload_text": "abc"})
	if r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r = jsonCall(t, c, d, "GET", "/v1/jobs/h1", nil)
		if r.body["state"] == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not done: %s", r.raw)
		}
		<-tick.C
	}
	var res Result
	b, _ := json.Marshal(r.body["result"])
	var raw []byte
	if err := json.Unmarshal(b, &raw); err != nil || json.Unmarshal(raw, &res) != nil {
		t.Fatalf("result: %s", r.raw)
	}
	if res.Job != "h1" || res.Member != "t1" || res.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("result %+v", res)
	}
}

func TestTLSAPI(t *testing.T) {
	dir := t.TempDir()
	if err := gencerts([]string{"-dir", dir, "-names", "api"}); err != nil {
		t.Fatal(err)
	}
	d, _ := startTest(t, func(o *options) {
		o.APICert, o.APIKey = filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	})
	if !strings.HasPrefix(d.URL(), "https://") {
		t.Fatalf("URL %s is not https", d.URL())
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitReady(t, d, c)
	if r := jsonCall(t, c, d, "GET", "/v1/stats", nil); r.code != http.StatusOK {
		t.Fatalf("stats over TLS: %d %s", r.code, r.raw)
	}
	if r := call(t, c, "GET", d.URL()+"/v1/stats", "", "", nil); r.code != http.StatusUnauthorized {
		t.Fatalf("no token over TLS: %d, want 401", r.code)
	}
	// Plain HTTP to the TLS port is refused; so is a client that does not
	// trust the CA.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + strings.TrimPrefix(d.URL(), "https://") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served on the TLS port")
		}
	}
	if _, err := plain.Get(d.URL() + "/healthz"); err == nil {
		t.Fatal("a client without the CA connected")
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no id", []string{"-data", "x"}, "-id is required"},
		{"non-loopback without TLS", []string{"-id", "a", "-data", "x", "-raft-addr", "10.1.2.3:7400"}, "not loopback"},
		{"half TLS", []string{"-id", "a", "-data", "x", "-cluster-ca", "ca.pem"}, "go together"},
		{"peers without self", []string{"-id", "a", "-data", "x", "-peers", "b=127.0.0.1:1"}, "does not name this member"},
		{"bad queues", []string{"-id", "a", "-data", "x", "-queues", "q=0"}, "concurrency"},
		{"exec shadows builtin", []string{"-id", "a", "-data", "x", "-exec", "echo=true"}, "built-in"},
		{"snapshot log ratio NaN", []string{"-id", "a", "-data", "x", "-snapshot-log-ratio", "NaN"}, "-snapshot-log-ratio"},
		{"snapshot log ratio too large", []string{"-id", "a", "-data", "x", "-snapshot-log-ratio", "1000"}, "-snapshot-log-ratio"},
	} {
		_, err := parseOptions(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := parseOptions([]string{"-id", "a", "-data", "x", "-raft-addr", "10.1.2.3:7400", "-insecure-cluster"}); err != nil {
		t.Errorf("-insecure-cluster: %v", err)
	}
	for _, r := range []string{"0.25", "-1"} {
		if o, err := parseOptions([]string{"-id", "a", "-data", "x", "-snapshot-log-ratio", r}); err != nil || fmt.Sprint(o.SnapshotRatio) != r {
			t.Errorf("-snapshot-log-ratio %s: %v (ratio %v)", r, err, o.SnapshotRatio)
		}
	}
	o := options{}
	t.Setenv("JOBD_TOKEN", "")
	if _, err := o.token(); err == nil {
		t.Error("no token accepted")
	}
}

func TestConfigFileAndFlagsOverride(t *testing.T) {
	f := filepath.Join(t.TempDir(), "jobd.json")
	if err := os.WriteFile(f, []byte(`{"id":"fromfile","data":"/d","queues":"a=2,b=3","lease-ttl":"5s","workers":false,"max-body":4096,"exec":["up=tr a-z A-Z"],"snapshot-log-ratio":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"-config", f, "-id", "fromflag"})
	if err != nil {
		t.Fatal(err)
	}
	if o.ID != "fromflag" || o.DataDir != "/d" || o.Queues != "a=2,b=3" || o.LeaseTTL != 5*time.Second ||
		o.Workers || o.MaxBody != 4096 || len(o.Exec) != 1 || o.SnapshotRatio != 2 {
		t.Fatalf("options %+v", o)
	}
	if err := os.WriteFile(f, []byte(`{"id":"x","unknown":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOptions([]string{"-config", f}); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown config key: %v", err)
	}
}
