package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// In a browser: the Schedules page after a schedule fired, then its
// Pause button (screenshots schedules.png, schedules-paused.png).
func TestConsoleSchedulesInBrowser(t *testing.T) {
	bin := needChromium(t)
	d, api := startTest(t, func(o *options) { o.Workers = false })
	for _, s := range []map[string]any{
		{"id": "every-second", "every": "1s", "queue": "ticks", "kind": "tick", "catch_up": "skip"},
		{"id": "nightly-report", "cron": "30 2 * * *", "zone": "America/New_York", "queue": "reports", "kind": "render", "overlap": "skip"},
	} {
		wantCode(t, jsonCall(t, api, d, "POST", "/v1/schedules", s), 201)
	}
	b := newBrowser(t, bin, d.URL(), testToken)
	b.login()
	deadline := time.Now().Add(20 * time.Second)
	for r := jsonCall(t, api, d, "GET", "/v1/schedules/every-second", nil); r.body["fired"].(float64) < 2; r = jsonCall(t, api, d, "GET", "/v1/schedules/every-second", nil) {
		if time.Now().After(deadline) {
			t.Fatalf("the schedule did not fire twice in 20s: %s", r.raw)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	b.do(chromedp.Navigate(d.URL()+"/console/schedules"), chromedp.WaitVisible(chromedp.ID("schedules")))
	if n := b.count(`#schedules tr.schedule`); n != 2 {
		t.Fatalf("%d schedule rows, want 2", n)
	}
	b.wantText(`tr[data-schedule="nightly-report"] td:nth-child(2)`, "30 2 * * * (America/New_York)")
	b.shot("schedules")
	b.submit(chromedp.Click(`tr[data-schedule="every-second"] button.pause`))
	b.wantText(`tr[data-schedule="every-second"] .badge`, "paused")
	if r := jsonCall(t, api, d, "GET", "/v1/schedules/every-second", nil); r.body["paused"] != true {
		t.Fatalf("API after the console's pause: %s", r.raw)
	}
	b.shot("schedules-paused")
}
