package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// consoleClient logs in to d's console and returns a client with the
// session cookie (redirects are not followed).
func consoleClient(t *testing.T, d *daemon) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(d.URL()+"/console/login", url.Values{"token": {testToken}, "next": {"/console/cluster"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/cluster" {
		t.Fatalf("login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || strings.Contains(ck[0].Value, testToken) {
		t.Fatalf("session cookie %+v", ck)
	}
	return c
}

func getPage(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func wantCode(t *testing.T, r reply, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("HTTP %d, want %d: %s", r.code, code, r.raw)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// The console is behind the token: no session, a wrong token or a forged
// cookie gets the login form, never a page; the token is never in a URL.
func TestConsoleNeedsToken(t *testing.T) {
	d, _ := startTest(t, nil)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/console/queues", "/console/jobs", "/console/job?id=x", "/console/cluster"} {
		code, _, h := getPage(t, plain, d.URL()+p)
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login?next=") {
			t.Errorf("%s without a session: %d %s", p, code, h.Get("Location"))
		}
	}
	resp, err := plain.PostForm(d.URL()+"/console/login", url.Values{"token": {"wrong-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	req, _ := http.NewRequest("GET", d.URL()+"/console/queues", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "99999999999.00"})
	resp, err = plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("forged cookie: %d", resp.StatusCode)
	}
	// Static files are served (no secrets in them), listings are not.
	if code, body, _ := getPage(t, plain, d.URL()+"/console/static/console.js"); code != 200 || !strings.Contains(body, "EventSource") {
		t.Errorf("console.js: %d", code)
	}
	if code, _, _ := getPage(t, plain, d.URL()+"/console/static/"); code != http.StatusNotFound {
		t.Errorf("static listing: %d", code)
	}
	// A post-login redirect stays on the console.
	for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/v1/jobs"} {
		if got := safeNext(next); got != "/console/queues" {
			t.Errorf("safeNext(%q) = %q", next, got)
		}
	}
}

// Actions need the session's CSRF field and a same-origin form post;
// refused ones change nothing.
func TestConsoleActionsNeedCSRF(t *testing.T) {
	d, api := startTest(t, nil)
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": "c1", "queue": "q", "kind": "k"}), 201)
	c := consoleClient(t, d)
	code, body, h := getPage(t, c, d.URL()+"/console/job?id=c1")
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("job page: %d %v", code, h)
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field on the job page")
	}
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", d.URL()+"/console/job/cancel", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(url.Values{"id": {"c1"}}, ""); code != http.StatusForbidden {
		t.Errorf("no CSRF field: %d", code)
	}
	if code := post(url.Values{"id": {"c1"}, "csrf": {strings.Repeat("0", 32)}}, ""); code != http.StatusForbidden {
		t.Errorf("wrong CSRF field: %d", code)
	}
	if code := post(url.Values{"id": {"c1"}, "csrf": {m[1]}}, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin: %d", code)
	}
	r := jsonCall(t, api, d, "GET", "/v1/jobs/c1", nil)
	if r.body["state"] != "pending" {
		t.Fatalf("a refused action changed the job: %v", r.body)
	}
	if code := post(url.Values{"id": {"c1"}, "csrf": {m[1]}}, d.URL()); code != http.StatusSeeOther {
		t.Errorf("valid cancel: %d", code)
	}
	if r := jsonCall(t, api, d, "GET", "/v1/jobs/c1", nil); r.body["state"] != "canceled" {
		t.Errorf("after cancel: %v", r.body)
	}
}

// Job IDs, kinds, keys, queue names and errors are user data: escaped on
// every page. The payload's bytes appear only when asked for.
func TestConsoleEscapesAndHidesPayload(t *testing.T) {
	d, api := startTest(t, nil)
	evil := `<script>alert(1)</script>`
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": "e1", "queue": "q" + evil, "kind": evil,
		"idempotency_key": evil, "payload_text": "PAYLOAD-BYTES"}), 201)
	c := consoleClient(t, d)
	for _, p := range []string{"/console/queues", "/console/jobs?queue=" + url.QueryEscape("q"+evil), "/console/job?id=e1"} {
		code, body, _ := getPage(t, c, d.URL()+p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		if strings.Contains(body, evil) || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: user data not escaped", p)
		}
		if strings.Contains(body, "PAYLOAD-BYTES") {
			t.Errorf("%s shows the payload unasked", p)
		}
	}
	if _, body, _ := getPage(t, c, d.URL()+"/console/job?id=e1&payload=1"); !strings.Contains(body, "PAYLOAD-BYTES") {
		t.Error("payload=1 does not show the payload")
	}
	if code, body, _ := getPage(t, c, d.URL()+"/console/job?id=no-such-job"); code != http.StatusNotFound || !strings.Contains(body, "not_found") {
		t.Errorf("unknown job: %d", code)
	}
	if code, _, _ := getPage(t, c, d.URL()+"/console/job?id=%00bad"); code != http.StatusBadRequest {
		t.Errorf("bad job ID: %d", code)
	}
}
