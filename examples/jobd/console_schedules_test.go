package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The schedules page lists each schedule with its definition and counts;
// its pause, resume and delete buttons act (with the session's CSRF
// field, and not without it).
func TestConsoleSchedules(t *testing.T) {
	d, api := startTest(t, func(o *options) { o.Workers = false })
	c := consoleClient(t, d)
	if code, body, _ := getPage(t, c, d.URL()+"/console/schedules"); code != 200 || !strings.Contains(body, `id="no-schedules"`) {
		t.Fatalf("empty schedules page: %d", code)
	}
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/schedules", map[string]any{"id": "hourly-report", "cron": "0 * * * *", "zone": "Europe/Paris", "queue": "rq", "kind": "report"}), 201)
	code, body, _ := getPage(t, c, d.URL()+"/console/schedules")
	for _, want := range []string{`data-schedule="hourly-report"`, "<code>0 * * * *</code> (Europe/Paris)", `href="/console/jobs?queue=rq"`, ">Pause</button>", `href="/console/schedules" class="active"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("schedules page lacks %q (HTTP %d)", want, code)
		}
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field on the schedules page")
	}
	post := func(action string, form url.Values) (int, string) {
		req, _ := http.NewRequest("POST", d.URL()+"/console/schedules/"+action, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	if code, _ := post("pause", url.Values{"id": {"hourly-report"}}); code != http.StatusForbidden {
		t.Fatalf("pause without CSRF: %d", code)
	}
	if r := jsonCall(t, api, d, "GET", "/v1/schedules/hourly-report", nil); r.body["paused"] != false {
		t.Fatalf("a refused action paused it: %s", r.raw)
	}
	if code, loc := post("pause", url.Values{"id": {"hourly-report"}, "csrf": {m[1]}}); code != http.StatusSeeOther || !strings.Contains(loc, "paused") {
		t.Fatalf("pause: %d %s", code, loc)
	}
	if _, body, _ := getPage(t, c, d.URL()+"/console/schedules"); !strings.Contains(body, `<span class="badge paused">paused</span>`) || !strings.Contains(body, ">Resume</button>") {
		t.Fatal("paused schedule not shown paused")
	}
	if code, _ := post("delete", url.Values{"id": {"hourly-report"}, "csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("delete: %d", code)
	}
	if r := jsonCall(t, api, d, "GET", "/v1/schedules/hourly-report", nil); r.code != 404 {
		t.Fatalf("after delete: %d %s", r.code, r.raw)
	}
	if code, _ := post("resume", url.Values{"id": {"hourly-report"}, "csrf": {m[1]}}); code != http.StatusNotFound {
		t.Fatalf("resume of a deleted schedule: %d, want 404", code)
	}
}
