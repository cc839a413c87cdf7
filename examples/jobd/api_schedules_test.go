package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Schedules over the API: a create (201), its repeat (200, new false), a
// clash (409 schedule_exists); bad input refused 400 with its own kind
// (bad_cron, bad_interval, unknown_zone) and nothing created; the schedule
// fires every second into its queue, its jobs readable by their derived
// IDs; pause, resume, delete (then 404 schedule_not_found).
func TestScheduleAPI(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	cases := []struct {
		name, body string
		code       int
		kind       string
	}{
		{"bad cron", `{"id":"s","cron":"61 * * * *","queue":"q","kind":"k"}`, 400, "bad_cron"},
		{"cron with a zone prefix", `{"id":"s","cron":"TZ=UTC * * * * *","queue":"q","kind":"k"}`, 400, "bad_cron"},
		{"neither cron nor interval", `{"id":"s","queue":"q","kind":"k"}`, 400, "bad_interval"},
		{"interval 0", `{"id":"s","every":0,"queue":"q","kind":"k"}`, 400, "bad_interval"},
		{"interval negative", `{"id":"s","every":"-1s","queue":"q","kind":"k"}`, 400, "bad_interval"},
		{"interval below the floor", `{"id":"s","every":"10ms","queue":"q","kind":"k"}`, 400, "bad_interval"},
		{"unknown zone", `{"id":"s","cron":"0 * * * *","zone":"Mars/Base","queue":"q","kind":"k"}`, 400, "unknown_zone"},
		{"local zone", `{"id":"s","cron":"0 * * * *","zone":"Local","queue":"q","kind":"k"}`, 400, "unknown_zone"},
		{"both", `{"id":"s","cron":"0 * * * *","every":"1m","queue":"q","kind":"k"}`, 400, "invalid"},
		{"bad id", `{"id":"a:b","every":"1m","queue":"q","kind":"k"}`, 400, "invalid"},
		{"no queue", `{"id":"s","every":"1m","kind":"k"}`, 400, "bad_request"},
		{"bad overlap", `{"id":"s","every":"1m","queue":"q","kind":"k","overlap":"sometimes"}`, 400, "bad_request"},
		{"bad catch-up", `{"id":"s","every":"1m","queue":"q","kind":"k","catch_up":"all"}`, 400, "bad_request"},
		{"unknown field", `{"id":"s","every":"1m","queue":"q","kind":"k","bogus":1}`, 400, "bad_request"},
	}
	for _, tc := range cases {
		r := call(t, c, "POST", d.URL()+"/v1/schedules", testToken, "application/json", []byte(tc.body))
		if r.code != tc.code || r.body["error"] != tc.kind || r.body["reason"] == "" {
			t.Errorf("%s: got %d %s, want %d %s with a reason", tc.name, r.code, r.raw, tc.code, tc.kind)
		}
	}
	if r := jsonCall(t, c, d, "GET", "/v1/schedules", nil); r.code != 200 || len(r.body["schedules"].([]any)) != 0 {
		t.Fatalf("refused creates left schedules: %d %s", r.code, r.raw)
	}

	def := map[string]any{"id": "tick", "every": "1s", "queue": "sq", "kind": "k", "payload_text": "p", "overlap": "allow", "catch_up": "one"}
	r := jsonCall(t, c, d, "POST", "/v1/schedules", def)
	if r.code != http.StatusCreated || r.body["new"] != true || r.body["next"] == nil || r.body["payload_text"] != "p" {
		t.Fatalf("create: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/schedules", def); r.code != http.StatusOK || r.body["new"] != false {
		t.Fatalf("repeated create: %d %s", r.code, r.raw)
	}
	other := map[string]any{"id": "tick", "every": "2s", "queue": "sq", "kind": "k", "payload_text": "p"}
	if r = jsonCall(t, c, d, "POST", "/v1/schedules", other); r.code != http.StatusConflict || r.body["error"] != "schedule_exists" {
		t.Fatalf("create with another definition: %d %s", r.code, r.raw)
	}

	// It fires: jobs @tick:<tick> appear in sq, readable by ID.
	deadline := time.Now().Add(20 * time.Second)
	var fired float64
	for fired < 2 && time.Now().Before(deadline) {
		r = jsonCall(t, c, d, "GET", "/v1/schedules/tick", nil)
		fired, _ = r.body["fired"].(float64)
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if fired < 2 {
		t.Fatalf("schedule fired %v jobs in 20s: %s", fired, r.raw)
	}
	r = jsonCall(t, c, d, "GET", "/v1/jobs?queue=sq", nil)
	jobs, _ := r.body["jobs"].([]any)
	if r.code != 200 || len(jobs) < 2 {
		t.Fatalf("list sq: %d %s", r.code, r.raw)
	}
	id := jobs[0].(map[string]any)["id"].(string)
	if !strings.HasPrefix(id, "@tick:") {
		t.Fatalf("fired job ID %q", id)
	}
	if r = jsonCall(t, c, d, "GET", "/v1/jobs/"+id, nil); r.code != 200 || r.body["payload_text"] != "p" {
		t.Fatalf("get fired job %s: %d %s", id, r.code, r.raw)
	}

	if r = jsonCall(t, c, d, "POST", "/v1/schedules/tick/pause", nil); r.code != 200 || r.body["paused"] != true {
		t.Fatalf("pause: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "POST", "/v1/schedules/tick/resume", nil); r.code != 200 || r.body["paused"] != false {
		t.Fatalf("resume: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "DELETE", "/v1/schedules/tick", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
	for _, rt := range [][2]string{{"GET", "/v1/schedules/tick"}, {"DELETE", "/v1/schedules/tick"}, {"POST", "/v1/schedules/tick/pause"}, {"POST", "/v1/schedules/nope/resume"}} {
		if r = jsonCall(t, c, d, rt[0], rt[1], nil); r.code != http.StatusNotFound || r.body["error"] != "schedule_not_found" {
			t.Errorf("%s %s after delete: %d %s", rt[0], rt[1], r.code, r.raw)
		}
	}
}
