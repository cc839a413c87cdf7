package main

import (
	"strings"
	"testing"
)

// Limits over the API: bad input is refused with 400 and changes nothing
// (a limit of 0, a negative rate, a unique state that does not exist);
// a limit set holds (a claim at it leases nothing), stats, metrics and
// the console's queues page show it with the claims it held back; a
// unique submit's duplicate names the existing job.
func TestLimitsAPI(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	for _, bad := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/queues/lq/limit", map[string]any{"max": 0}},
		{"POST", "/v1/queues/lq/limit", map[string]any{"max": -1}},
		{"POST", "/v1/queues/lq/limit", map[string]any{"max": 1 << 32}},
		{"POST", "/v1/queues/lq/limit", map[string]any{"max": 1, "kind": strings.Repeat("k", 200)}},
		{"POST", "/v1/queues/lq/rate", map[string]any{"per_second": -1}},
		{"POST", "/v1/queues/lq/rate", map[string]any{"per_second": 0}},
		{"POST", "/v1/queues/lq/rate", map[string]any{"per_second": 3e9}},
		{"POST", "/v1/queues/lq/rate", map[string]any{"per_second": 1, "burst": -1}},
		{"POST", "/v1/jobs", map[string]any{"queue": "lq", "kind": "k", "unique": map[string]any{"states": []string{"pending", "scheduled", "running", "nope"}}}},
		{"POST", "/v1/jobs", map[string]any{"queue": "lq", "kind": "k", "unique": map[string]any{"period": "-1s"}}},
	} {
		r := jsonCall(t, c, d, bad.method, bad.path, bad.body)
		if r.code != 400 {
			t.Errorf("%s %s %v: HTTP %d %s, want 400", bad.method, bad.path, bad.body, r.code, r.raw)
		}
	}
	r := jsonCall(t, c, d, "GET", "/v1/limits", nil)
	wantCode(t, r, 200)
	if ls := r.body["limits"].([]any); len(ls) != 0 {
		t.Fatalf("refused requests left limits: %s", r.raw)
	}
	wantCode(t, jsonCall(t, c, d, "POST", "/v1/queues/lq/limit", map[string]any{"max": 1}), 200)
	r = jsonCall(t, c, d, "POST", "/v1/queues/lq/rate", map[string]any{"per_second": 0.5, "burst": 3})
	wantCode(t, r, 200)
	if r.body["max"].(float64) != 1 || r.body["rate"].(map[string]any)["burst"].(float64) != 3 {
		t.Fatalf("set rate reply %s", r.raw)
	}
	for range 3 {
		wantCode(t, jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"queue": "lq", "kind": "k"}), 201)
	}
	r = jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"lq"}, "worker": "w", "max": 3})
	wantCode(t, r, 200)
	if n := len(r.body["leases"].([]any)); n != 1 {
		t.Fatalf("leased %d under a limit of 1", n)
	}
	r = jsonCall(t, c, d, "GET", "/v1/stats", nil)
	wantCode(t, r, 200)
	lim := r.body["limits"].([]any)[0].(map[string]any)
	if lim["queue"] != "lq" || lim["running"].(float64) != 1 || lim["limited"].(float64) != 1 {
		t.Fatalf("stats limits %v (the claim had room for 3 and was held back)", lim)
	}
	if r := call(t, c, "GET", d.URL()+"/metrics", testToken, "", nil); !strings.Contains(r.raw, `jobd_limited_claims_total{by="concurrency",queue="lq"} 1`) ||
		!strings.Contains(r.raw, `jobd_queue_limit{kind="",queue="lq"} 1`) {
		t.Fatalf("metrics lack the limit: %s", r.raw)
	}
	cc := consoleClient(t, d)
	if code, page, _ := getPage(t, cc, d.URL()+"/console/queues"); code != 200 || !strings.Contains(page, `id="limits"`) ||
		!strings.Contains(page, `data-field="concurrency">1 / 1<`) || !strings.Contains(page, `data-field="limited">1<`) {
		t.Fatalf("console queues page: %d, no limits table with lq's limit and count", code)
	}
	wantCode(t, jsonCall(t, c, d, "DELETE", "/v1/queues/lq/limit", nil), 200)
	r = jsonCall(t, c, d, "DELETE", "/v1/queues/lq/rate", nil)
	wantCode(t, r, 200)
	if _, has := r.body["rate"]; has || r.body["queue"] != "lq" {
		t.Fatalf("clear rate reply %s", r.raw)
	}
	u := map[string]any{"queue": "uq", "kind": "k", "payload_text": "same", "unique": map[string]any{"period": "1h", "states": []string{"succeeded"}}}
	first := jsonCall(t, c, d, "POST", "/v1/jobs", u)
	wantCode(t, first, 201)
	again := jsonCall(t, c, d, "POST", "/v1/jobs", u)
	wantCode(t, again, 200)
	fj, aj := first.body["job"].(map[string]any), again.body["job"].(map[string]any)
	if again.body["duplicate"] != true || aj["id"] != fj["id"] || fj["unique"].(map[string]any)["held"] != true {
		t.Fatalf("unique resubmit: %s (first %s)", again.raw, first.raw)
	}
}
