package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
)

// "/" leads a browser to the console (then to its login form); API routes
// and unknown paths keep their 401 JSON without a token.
func TestConsoleRootLeadsToTheConsole(t *testing.T) {
	d, api := startTest(t, nil)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	code, _, h := getPage(t, plain, d.URL()+"/")
	if code != http.StatusSeeOther || h.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d %q, want 303 to /console/", code, h.Get("Location"))
	}
	code, _, h = getPage(t, plain, d.URL()+"/console/")
	if code != http.StatusSeeOther || h.Get("Location") != "/console/queues" {
		t.Fatalf("GET /console/: %d %q", code, h.Get("Location"))
	}
	code, _, h = getPage(t, plain, d.URL()+"/console/queues")
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login?next=") {
		t.Fatalf("GET /console/queues without a session: %d %q", code, h.Get("Location"))
	}
	for _, p := range []string{"/v1/stats", "/nope", "/v1/jobs/x"} {
		r := call(t, api, "GET", d.URL()+p, "", "", nil)
		if r.code != http.StatusUnauthorized || r.body["error"] != "unauthorized" {
			t.Errorf("GET %s without a token: %d %s, want 401 JSON", p, r.code, r.raw)
		}
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// readEvents reads server-sent events from u with the session of c until
// stop says so or the deadline passes.
// opened, if not nil, runs once the stream is open.
func readEvents(t *testing.T, c *http.Client, u string, d time.Duration, opened func(), stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if opened != nil {
		opened()
	}
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "" && ev.name != "":
			out = append(out, ev)
			if stop(ev) {
				return out
			}
			ev = sseEvent{}
		}
	}
	t.Fatalf("%s: the stream ended (%v) before the event awaited; got %v", u, sc.Err(), out)
	return nil
}

// The live stream needs a session; it carries a job's events (never its
// payload) to the job page, queue rows and charts to the queues page, and
// the cluster's health (with member rows on the cluster page only).
func TestConsoleLiveStream(t *testing.T) {
	d, api := startTest(t, nil)
	plain := &http.Client{}
	if code, _, _ := getPage(t, plain, d.URL()+"/console/live?page=queues"); code != http.StatusUnauthorized {
		t.Errorf("live without a session: %d, want 401", code)
	}
	c := consoleClient(t, d)
	if code, _, _ := getPage(t, c, d.URL()+"/console/live?page=bogus"); code != http.StatusBadRequest {
		t.Errorf("live page=bogus: %d, want 400", code)
	}
	if code, _, _ := getPage(t, c, d.URL()+"/console/live?page=job&id=%00"); code != http.StatusBadRequest {
		t.Errorf("live page=job with a bad ID: %d, want 400", code)
	}

	// The job page's stream: the submit of its job, without payload bytes.
	// The stream's watch starts before its headers are sent: a submit
	// once they came is in it.
	evs := readEvents(t, c, d.URL()+"/console/live?page=job&id=s1", 20*time.Second, func() {
		wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": "s1", "queue": "q", "kind": "k", "payload_text": "SECRET-PAYLOAD"}), 201)
	}, func(e sseEvent) bool { return e.name == "job" })
	last := evs[len(evs)-1]
	if !strings.Contains(last.data, `"kind":"submitted"`) || !strings.Contains(last.data, `"job":"s1"`) || strings.Contains(last.data, "SECRET") {
		t.Errorf("job event %s", last.data)
	}

	// The queues page's stream: rows and series; health without rows.
	var stats, health string
	readEvents(t, c, d.URL()+"/console/live?page=queues", 20*time.Second, nil, func(e sseEvent) bool {
		switch e.name {
		case "stats":
			stats = e.data
		case "health":
			health = e.data
		}
		return stats != "" && health != ""
	})
	for _, want := range []string{`"name":"q"`, `"counts":[1,0,0,0,0,0,0]`, `"series":{`, `"submitted":[`} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lacks %s: %s", want, stats)
		}
	}
	if strings.Contains(stats, "SECRET") {
		t.Error("stats carry payload bytes")
	}
	if !strings.Contains(health, `"quorum":true`) || !strings.Contains(health, `"members":null`) || !strings.Contains(health, `"banner":""`) {
		t.Errorf("queues page health: %s", health)
	}
	readEvents(t, c, d.URL()+"/console/live?page=cluster", 20*time.Second, nil, func(e sseEvent) bool {
		health = e.data
		return e.name == "health"
	})
	if !strings.Contains(health, `"members":[{"id":"t1"`) || !strings.Contains(health, `"catch_up":"caught up"`) {
		t.Errorf("cluster page health: %s", health)
	}
}

var rowIDRE = regexp.MustCompile(`<tr class="job" data-id="([^"]+)"`)
var pagerRE = regexp.MustCompile(`href="(/console/jobs\?[^"]+)" id="(newer|older)-page"`)

// The jobs page lists newest first (by last change), 50 a page: following
// "Older" visits every job once, in order; "Newer" from the last page
// leads back.
func TestConsoleJobsNewestFirstPagesBothWays(t *testing.T) {
	d, _ := startTest(t, nil)
	var reqs []jobraft.SubmitRequest
	for i := range 120 {
		reqs = append(reqs, jobraft.SubmitRequest{ID: fmt.Sprintf("p%03d", i), Queue: "q", Kind: "k"})
	}
	for i := 0; i < len(reqs); i += 40 { // three entries: three log times
		if _, err := d.ctl.SubmitBatch(context.Background(), reqs[i:i+40]); err != nil {
			t.Fatal(err)
		}
	}
	c := consoleClient(t, d)
	links := func(body string) map[string]string {
		out := map[string]string{}
		for _, m := range pagerRE.FindAllStringSubmatch(body, -1) {
			out[m[2]] = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		return out
	}
	ids := func(body string) []string {
		var out []string
		for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var all []string
	var pages [][]string
	u := "/console/jobs?queue=q"
	for u != "" {
		code, body, _ := getPage(t, c, d.URL()+u)
		if code != 200 {
			t.Fatalf("%s: %d", u, code)
		}
		got := ids(body)
		pages = append(pages, got)
		all = append(all, got...)
		if l := links(body); len(pages) > 1 && l["newer"] == "" {
			t.Fatalf("page %d has no Newer link", len(pages))
		}
		u = links(body)["older"]
	}
	if len(pages) != 3 || len(pages[0]) != 50 || len(pages[1]) != 50 || len(pages[2]) != 20 {
		t.Fatalf("pages of %v jobs", []int{len(pages[0]), len(pages[len(pages)-1])})
	}
	want := make([]string, 0, 120)
	for i := 119; i >= 0; i-- {
		want = append(want, fmt.Sprintf("p%03d", i))
	}
	if !slices.Equal(all, want) {
		t.Fatalf("newest first over the pages: %v", all)
	}
	// Back from the last page.
	_, body, _ := getPage(t, c, d.URL()+"/console/jobs?queue=q&"+url.Values{"before": {"0.0"}}.Encode())
	if len(ids(body)) != 0 {
		t.Errorf("before the oldest: %v", ids(body))
	}
	code, last, _ := getPage(t, c, d.URL()+"/console/jobs?queue=q&before="+strings.Split(links(mustGet(t, c, d.URL()+"/console/jobs?queue=q"))["older"], "before=")[1])
	if code != 200 || !slices.Equal(ids(last), pages[1]) {
		t.Fatalf("second page again: %d %v", code, ids(last))
	}
	_, back, _ := getPage(t, c, d.URL()+links(last)["newer"])
	if !slices.Equal(ids(back), pages[0]) {
		t.Errorf("newer from the second page: %v, want the first", ids(back))
	}
	if code, _, _ := getPage(t, c, d.URL()+"/console/jobs?queue=q&before=x"); code != http.StatusBadRequest {
		t.Errorf("a bad cursor: %d, want 400", code)
	}
}

func mustGet(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	code, body, _ := getPage(t, c, u)
	if code != 200 {
		t.Fatalf("%s: %d", u, code)
	}
	return body
}

// Bulk actions: each job's outcome as the controller answered (a refused
// job says why and is unchanged); CSRF and the size bound are checked
// before anything changes.
func TestConsoleBulkShowsEachOutcome(t *testing.T) {
	d, api := startTest(t, nil)
	for _, id := range []string{"b1", "b2"} {
		wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": id, "queue": "q", "kind": "k"}), 201)
	}
	c := consoleClient(t, d)
	body := mustGet(t, c, d.URL()+"/console/jobs?queue=q")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field on the jobs page")
	}
	post := func(form url.Values) (int, string) {
		t.Helper()
		resp, err := c.PostForm(d.URL()+"/console/jobs/bulk", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		_, _ = bufio.NewReader(resp.Body).WriteTo(b)
		return resp.StatusCode, b.String()
	}
	if code, _ := post(url.Values{"action": {"cancel"}, "id": {"b1"}}); code != http.StatusForbidden {
		t.Errorf("bulk without CSRF: %d", code)
	}
	many := make([]string, bulkMax+1)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	if code, _ := post(url.Values{"csrf": {m[1]}, "action": {"cancel"}, "id": many}); code != http.StatusBadRequest {
		t.Errorf("bulk of %d jobs: %d", len(many), code)
	}
	if code, _ := post(url.Values{"csrf": {m[1]}, "action": {"delete"}, "id": {"b1"}}); code != http.StatusBadRequest {
		t.Errorf("bulk delete: %d", code)
	}
	if r := jsonCall(t, api, d, "GET", "/v1/jobs/b1", nil); r.body["state"] != "pending" {
		t.Fatalf("a refused bulk changed b1: %v", r.body)
	}
	code, page := post(url.Values{"csrf": {m[1]}, "action": {"cancel"}, "id": {"b1", "nope"}, "return": {"queue=q"}})
	if code != 200 || !strings.Contains(page, "Bulk cancel: 1 done, 1 refused") ||
		!strings.Contains(page, "cancel done: now canceled") || !strings.Contains(page, "refused (not_found)") ||
		!strings.Contains(page, `href="/console/jobs?queue=q"`) {
		t.Fatalf("bulk cancel: %d\n%s", code, page)
	}
	code, page = post(url.Values{"csrf": {m[1]}, "action": {"retry"}, "id": {"b1", "b2"}})
	if code != 200 || !strings.Contains(page, "Bulk retry: 1 done, 1 refused") || !strings.Contains(page, "refused (invalid_state)") {
		t.Fatalf("bulk retry: %d\n%s", code, page)
	}
	for id, want := range map[string]string{"b1": "pending", "b2": "pending"} {
		if r := jsonCall(t, api, d, "GET", "/v1/jobs/"+id, nil); r.body["state"] != want {
			t.Errorf("%s: %v, want %s", id, r.body["state"], want)
		}
	}
}

// A job's result is shown on request only, as escaped text when it is
// UTF-8 (a <script> in it stays text) and as hex when it is not.
func TestConsoleResultPreviewEscapes(t *testing.T) {
	d, _ := startTest(t, nil)
	ctx := context.Background()
	evil := `<script>alert("result")</script>`
	for id, result := range map[string][]byte{"r1": []byte(evil), "r2": {0xff, 0x00, 0x41}} {
		if _, err := d.ctl.Submit(ctx, jobraft.SubmitRequest{ID: id, Queue: "manual", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
		ls, err := d.ctl.Claim(ctx, jobraft.ClaimRequest{Queues: []string{"manual"}, Worker: "w"})
		if err != nil || len(ls) != 1 {
			t.Fatalf("claim %s: %v", id, err)
		}
		if err := ls[0].Ack(ctx, result); err != nil {
			t.Fatal(err)
		}
	}
	c := consoleClient(t, d)
	body := mustGet(t, c, d.URL()+"/console/job?id=r1")
	if strings.Contains(body, "alert(") || !strings.Contains(body, fmt.Sprintf("%d bytes · <a", len(evil))) {
		t.Errorf("the result without asking: shown, or its size missing")
	}
	body = mustGet(t, c, d.URL()+"/console/job?id=r1&result=1")
	if strings.Contains(body, evil) || !strings.Contains(body, `&lt;script&gt;alert(&#34;result&#34;)&lt;/script&gt;`) ||
		!strings.Contains(body, fmt.Sprintf("%d bytes, shown as text (UTF-8)", len(evil))) {
		t.Errorf("result=1 on r1: not shown as escaped text")
	}
	body = mustGet(t, c, d.URL()+"/console/job?id=r2&result=1")
	if !strings.Contains(body, `<pre id="result" class="hex">ff0041`) || !strings.Contains(body, "3 bytes, shown as hex (not UTF-8)") {
		t.Errorf("result=1 on r2: not shown as hex")
	}
}

// The queues page names a kind no worker claims, as GET /v1/stats does
// (unserved.go), and not the kinds jobd's own workers serve.
func TestConsoleQueuesShowUnservedKinds(t *testing.T) {
	d, api := startTest(t, func(o *options) { o.UnservedAfter = 300 * time.Millisecond })
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": "u1", "queue": "q", "kind": "nobody"}), 201)
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/jobs", map[string]any{"id": "e1", "queue": "work", "kind": "echo"}), 201)
	c := consoleClient(t, d)
	hintRE := regexp.MustCompile(`<tr class="queue" data-queue="(\w+)">\s*<td>.*\s*<div class="hint" data-field="hint">([^<]+)</div>`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		hints := map[string]string{}
		for _, m := range hintRE.FindAllStringSubmatch(mustGet(t, c, d.URL()+"/console/queues"), -1) {
			hints[m[1]] = m[2]
		}
		if h := hints["q"]; h != "" {
			if !strings.HasPrefix(h, "kind nobody: no job of this kind was claimed from this queue for ") || hints["work"] != "" {
				t.Fatalf("hints %q", hints)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hint for kind nobody within 20 s: %q", hints)
		}
		time.Sleep(50 * time.Millisecond) // polling the page, not waiting for state
	}
}
