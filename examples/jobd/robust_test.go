package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send issues one request with a client that gives up after 10s, so a
// route that hangs fails the test instead of stalling it.
func send(c *http.Client, method, url, token, ctype, body string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// TestMalformedInputsRefused sends bad bodies, IDs, times, query values and
// methods: each gets its 4xx with a reason (never a 5xx, never a hang) and
// nothing is created.
func TestMalformedInputsRefused(t *testing.T) {
	d, _ := startTest(t, func(o *options) { o.Workers = false })
	c := &http.Client{Timeout: 10 * time.Second}
	const js = "application/json"
	job := func(extra string) string { return `{"queue":"work","kind":"echo"` + extra + `}` }
	farFuture := time.Now().Add(400 * 24 * time.Hour).UTC().Format(time.RFC3339)
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, method, path, token, ctype, body string
		code                                   int
		allow                                  string // the Allow header a 405 must carry
	}{
		// Content type.
		{"body without content type", "POST", "/v1/jobs", testToken, "", job(""), 415, ""},
		{"text/plain body", "POST", "/v1/jobs", testToken, "text/plain", job(""), 415, ""},
		{"application/jsonp body", "POST", "/v1/jobs", testToken, "application/jsonp", job(""), 415, ""},
		{"latin-1 body", "POST", "/v1/jobs", testToken, "application/json; charset=iso-8859-1", job(""), 415, ""},
		{"cancel body without content type", "POST", "/v1/jobs/x/cancel", testToken, "", `{"reason":"r"}`, 415, ""},
		// IDs in bodies.
		{"id with NUL", "POST", "/v1/jobs", testToken, js, job(`,"id":"a\u0000b"`), 400, ""},
		{"id with CR LF", "POST", "/v1/jobs", testToken, js, job(`,"id":"a\r\nb"`), 400, ""},
		{"id with ../", "POST", "/v1/jobs", testToken, js, job(`,"id":"../etc"`), 400, ""},
		{"id with /", "POST", "/v1/jobs", testToken, js, job(`,"id":"a/b"`), 400, ""},
		{"id ..", "POST", "/v1/jobs", testToken, js, job(`,"id":".."`), 400, ""},
		{"id .", "POST", "/v1/jobs", testToken, js, job(`,"id":"."`), 400, ""},
		{"id with space", "POST", "/v1/jobs", testToken, js, job(`,"id":"a b"`), 400, ""},
		{"id non-ASCII", "POST", "/v1/jobs", testToken, js, job(`,"id":"\u00e9"`), 400, ""},
		{"id lone high surrogate", "POST", "/v1/jobs", testToken, js, job(`,"id":"\ud800"`), 400, ""},
		{"id lone low surrogate", "POST", "/v1/jobs", testToken, js, job(`,"id":"x\udc00"`), 400, ""},
		{"id too long", "POST", "/v1/jobs", testToken, js, job(`,"id":"` + strings.Repeat("a", 257) + `"`), 400, ""},
		{"batch job with a bad id", "POST", "/v1/jobs/batch", testToken, js, `{"jobs":[` + job(`,"id":"ok"`) + `,` + job(`,"id":"a/b"`) + `]}`, 400, ""},
		// Unicode anywhere in a body.
		{"payload_text lone surrogate", "POST", "/v1/jobs", testToken, js, job(`,"payload_text":"\ud800"`), 400, ""},
		{"high surrogate then a letter", "POST", "/v1/jobs", testToken, js, job(`,"payload_text":"\ud800\u0041"`), 400, ""},
		{"two high surrogates", "POST", "/v1/jobs", testToken, js, job(`,"payload_text":"\ud800\ud800"`), 400, ""},
		{"idempotency key lone surrogate", "POST", "/v1/jobs", testToken, js, job(`,"idempotency_key":"k\udfff"`), 400, ""},
		{"raw invalid UTF-8", "POST", "/v1/jobs", testToken, js, job(`,"payload_text":"` + "\xff\xfe" + `"`), 400, ""},
		// Times.
		{"run_at in year 9999", "POST", "/v1/jobs", testToken, js, job(`,"run_at":"9999-01-01T00:00:00Z"`), 400, ""},
		{"run_at beyond the max delay", "POST", "/v1/jobs", testToken, js, job(`,"run_at":"` + farFuture + `"`), 400, ""},
		{"run_at and delay", "POST", "/v1/jobs", testToken, js, job(`,"run_at":"` + soon + `","delay":"1s"`), 400, ""},
		{"negative delay", "POST", "/v1/jobs", testToken, js, job(`,"delay":"-1s"`), 400, ""},
		{"negative delay in seconds", "POST", "/v1/jobs", testToken, js, job(`,"delay":-0.5`), 400, ""},
		{"tiny negative delay", "POST", "/v1/jobs", testToken, js, job(`,"delay":-1e-12`), 400, ""},
		{"huge delay in seconds", "POST", "/v1/jobs", testToken, js, job(`,"delay":1e300`), 400, ""},
		{"nak negative delay", "POST", "/v1/jobs/x/nak", testToken, js, `{"token":1,"delay":-1e-12}`, 400, ""},
		// IDs in paths.
		{"path id with NUL", "GET", "/v1/jobs/a%00b", testToken, "", "", 400, ""},
		{"path id with CR LF", "GET", "/v1/jobs/a%0D%0Ab", testToken, "", "", 400, ""},
		{"path id ..", "GET", "/v1/jobs/%2E%2E", testToken, "", "", 400, ""},
		{"path id with /", "POST", "/v1/jobs/a%2Fb/cancel", testToken, js, `{}`, 400, ""},
		{"path id with space", "POST", "/v1/jobs/a%20b/ack", testToken, js, `{"token":1}`, 400, ""},
		{"path id with invalid UTF-8", "GET", "/v1/jobs/%FF", testToken, "", "", 400, ""},
		// Query values.
		{"watch unknown event kind", "GET", "/v1/watch?event=bogus", testToken, "", "", 400, ""},
		{"watch one unknown event kind", "GET", "/v1/watch?event=acked,nope", testToken, "", "", 400, ""},
		{"watch kind= naming an event kind", "GET", "/v1/watch?kind=acked", testToken, "", "", 400, ""},
		{"watch empty job kind", "GET", "/v1/watch?kind=echo,", testToken, "", "", 400, ""},
		{"watch bad job id", "GET", "/v1/watch?job=a%00b", testToken, "", "", 400, ""},
		{"walcompare from > to", "GET", "/v1/cluster/walcompare?from=10&to=5", testToken, "", "", 400, ""},
		// Methods.
		{"DELETE a job", "DELETE", "/v1/jobs/x", testToken, "", "", 405, "GET, HEAD"},
		{"GET claim", "GET", "/v1/claim", testToken, "", "", 405, "POST"},
		{"PUT jobs", "PUT", "/v1/jobs", testToken, js, job(""), 405, "GET, HEAD, POST"},
		{"GET ack", "GET", "/v1/jobs/x/ack", testToken, "", "", 405, "POST"},
		{"POST healthz (open)", "POST", "/healthz", "", "", "", 405, "GET, HEAD"},
		{"DELETE without token", "DELETE", "/v1/jobs/x", "", "", "", 401, ""},
		{"unknown route", "GET", "/v1/nope", testToken, "", "", 404, ""},
	}
	for _, tc := range cases {
		code, hdr, raw, err := send(c, tc.method, d.URL()+tc.path, tc.token, tc.ctype, tc.body)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if code != tc.code || !strings.Contains(raw, `"reason":"`) {
			t.Errorf("%s: got %d %s, want %d with a reason", tc.name, code, strings.TrimSpace(raw), tc.code)
		}
		if tc.allow != "" && hdr.Get("Allow") != tc.allow {
			t.Errorf("%s: Allow %q, want %q", tc.name, hdr.Get("Allow"), tc.allow)
		}
	}
	if n := jobCount(t, c, d); n != 0 {
		t.Fatalf("refused requests created %d jobs", n)
	}
}

// TestEdgeInputsAccepted: what the refusals above must not catch.
func TestEdgeInputsAccepted(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	id256 := strings.Repeat("b", 256)
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct{ name, ctype, body, id, payload string }{
		{"charset utf-8", "application/json; charset=utf-8", `{"id":"cs","queue":"work","kind":"echo"}`, "cs", ""},
		{"every id character", "application/json", `{"id":"Az09._:-","queue":"work","kind":"echo"}`, "Az09._:-", ""},
		{"256-byte id", "application/json", `{"id":"` + id256 + `","queue":"work","kind":"echo"}`, id256, ""},
		{"surrogate pair", "application/json", `{"id":"pair","queue":"work","kind":"echo","payload_text":"\ud83d\ude00"}`, "pair", "\U0001F600"},
		{"escaped backslash before u", "application/json", `{"id":"bs","queue":"work","kind":"echo","payload_text":"\\ud800"}`, "bs", `\ud800`},
		{"run_at", "application/json", `{"id":"ra","queue":"work","kind":"echo","run_at":"` + soon + `"}`, "ra", ""},
		{"delay", "application/json", `{"id":"dl","queue":"work","kind":"echo","delay":"1s"}`, "dl", ""},
	} {
		code, _, raw, err := send(c, "POST", d.URL()+"/v1/jobs", testToken, tc.ctype, tc.body)
		if err != nil || code != http.StatusCreated {
			t.Errorf("%s: %d %s %v, want 201", tc.name, code, raw, err)
			continue
		}
		r := jsonCall(t, c, d, "GET", "/v1/jobs/"+tc.id, nil)
		if r.code != http.StatusOK || r.body["id"] != tc.id {
			t.Errorf("%s: get %d %s", tc.name, r.code, r.raw)
		}
		if tc.payload != "" {
			var got struct{ Payload []byte }
			if err := jsonUnmarshal(r.raw, &got); err != nil || string(got.Payload) != tc.payload {
				t.Errorf("%s: payload %q, want %q", tc.name, got.Payload, tc.payload)
			}
		}
	}
	// A body-less cancel needs no content type.
	if code, _, raw, err := send(c, "POST", d.URL()+"/v1/jobs/cs/cancel", testToken, "", ""); err != nil || code != http.StatusOK {
		t.Errorf("cancel without a body: %d %s %v", code, raw, err)
	}
}

// rawRequest writes head (request line and headers, without the blank
// line) and body on a fresh connection to d.
func rawRequest(t *testing.T, d *daemon, head, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", d.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readResponse reads one response from conn, waiting at most within.
func readResponse(conn net.Conn, within time.Duration) (*http.Response, string, error) {
	_ = conn.SetReadDeadline(time.Now().Add(within))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The server must close the connection: the rest of that body was never read.
	if _, err := br.ReadByte(); err != io.EOF {
		return resp, string(b), fmt.Errorf("connection not closed after the reply: %v", err)
	}
	return resp, string(b), nil
}

// TestTokenCheckedBeforeBody: a request without a valid token is answered
// 401 at once and its connection closed, before any of its body arrives.
func TestTokenCheckedBeforeBody(t *testing.T) {
	d, _ := startTest(t, nil)
	for _, auth := range []string{"", "\r\nAuthorization: Bearer wrong-token-0123456789"} {
		conn := rawRequest(t, d, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100"+auth, "")
		resp, _, err := readResponse(conn, 5*time.Second)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("auth %q: %v %v, want 401 and a closed connection before the body", auth, resp, err)
		}
	}
}

// TestSlowBodyTimesOut: an authenticated body that stalls is answered 408
// after the read timeout and its connection closed; slow headers get the
// connection closed.
func TestSlowBodyTimesOut(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.ReadTimeout = time.Second })
	start := time.Now()
	conn := rawRequest(t, d, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nAuthorization: Bearer "+testToken, `{"queue":`)
	resp, raw, err := readResponse(conn, 8*time.Second)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body: %v %q %v, want 408 and a closed connection", resp, raw, err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("slow body answered after %v, before the 1s read timeout", el)
	}
	hconn := rawRequest(t, d, "GET /healthz HTTP/1.1\r\nHost: x", "")
	// Headers never finish (no blank line is sent after this one).
	if _, err := io.WriteString(hconn, "X-Slow: 1\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = hconn.SetReadDeadline(time.Now().Add(8 * time.Second))
	if _, err := io.ReadAll(hconn); err != nil {
		t.Fatalf("slow headers: connection not closed within 8s: %v", err)
	}
	assertNo5xx(t, c, d)
}

// TestAbortedBodyIsClientError: a client that stops mid-body (half-close)
// gets a 400, not a 500.
func TestAbortedBodyIsClientError(t *testing.T) {
	d, c := startTest(t, nil)
	conn := rawRequest(t, d, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nAuthorization: Bearer "+testToken, `{"queue":`)
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, raw, err := readResponse(conn, 8*time.Second)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("aborted body: %v %q %v, want 400", resp, raw, err)
	}
	assertNo5xx(t, c, d)
}

// assertNo5xx checks the request counter has no 5xx.
func assertNo5xx(t *testing.T, c *http.Client, d *daemon) {
	t.Helper()
	code, _, raw, err := send(c, "GET", d.URL()+"/metrics", testToken, "", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "jobd_http_requests_total") && strings.Contains(line, `code="5`) {
			t.Errorf("a 5xx was served: %s", line)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestLongRequestsOutliveReadTimeout: the body deadline ends with the body:
// a long-poll claim and a watch stream run past -read-timeout.
func TestLongRequestsOutliveReadTimeout(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers, o.ReadTimeout = false, 500*time.Millisecond })
	start := time.Now()
	r := jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "w", "wait": "2s"})
	if leases, _ := r.body["leases"].([]any); r.code != http.StatusOK || len(leases) != 0 {
		t.Fatalf("long-poll claim: %d %s", r.code, r.raw)
	}
	if el := time.Since(start); el < 1900*time.Millisecond {
		t.Fatalf("long-poll claim returned after %v, before its 2s wait", el)
	}
	req, err := http.NewRequest("GET", d.URL()+"/v1/watch?event=submitted", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Submit once the read timeout has passed (time itself is under test
	// here, not state): the stream still delivers.
	<-time.After(2 * time.Second)
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "late", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("watch stream ended before the event: %v", err)
		}
		if strings.Contains(line, `"job":"late"`) {
			return
		}
	}
}
