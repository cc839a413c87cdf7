package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// The operator's first hour (issue 29): what a new user trying jobd ran
// into, each checked at the HTTP boundary of a real jobd.

// A refusal's reason is the most specific message, said once: the reply's
// error kind names the class, the reason does not repeat it, and no
// package prefix ("jobraft: ", "fsm: ") is stacked on it.
func TestRefusalReasonSaysItOnce(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "c1", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs/c1/cancel", map[string]any{}); r.code != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.code, r.raw)
	}
	r := jsonCall(t, c, d, "POST", "/v1/jobs/c1/cancel", map[string]any{})
	reason := fmt.Sprint(r.body["reason"])
	if r.code != http.StatusConflict || r.body["error"] != "invalid_state" || reason != `cannot cancel canceled job "c1"` {
		t.Fatalf("second cancel: %d %s, want 409 invalid_state with reason %q", r.code, r.raw, `cannot cancel canceled job "c1"`)
	}
	r = jsonCall(t, c, d, "GET", "/v1/jobs/nope", nil)
	if reason := fmt.Sprint(r.body["reason"]); r.code != http.StatusNotFound || strings.Contains(reason, "jobraft:") || strings.Contains(reason, "fsm:") {
		t.Fatalf("get of a missing job: %d %s, want 404 with a reason without a package prefix", r.code, r.raw)
	}
}

// A job's payload and result come as text too (payload_text, result_text)
// when they are valid UTF-8; bytes that are not come in base64 only.
func TestRepliesGiveTextBesideBase64(t *testing.T) {
	d, c := startTest(t, nil)
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "t1", "queue": "work", "kind": "echo", "payload_text": "héllo"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "b1", "queue": "held", "kind": "echo", "payload": []byte{0xff, 0xfe, 0}}); r.code != http.StatusCreated {
		t.Fatalf("submit binary: %d %s", r.code, r.raw)
	}
	r := waitJobState(t, c, d, "t1", "succeeded")
	if r.body["payload_text"] != "héllo" || !strings.Contains(fmt.Sprint(r.body["result_text"]), `"echo":"héllo"`) || r.body["result"] == nil {
		t.Fatalf("get: %s, want payload_text and result_text beside payload and result", r.raw)
	}
	r = jsonCall(t, c, d, "GET", "/v1/jobs/b1", nil)
	if _, ok := r.body["payload_text"]; r.code != http.StatusOK || ok || r.body["payload"] != "//4A" {
		t.Fatalf("get binary: %d %s, want base64 only", r.code, r.raw)
	}
}

// waitJobState polls GET /v1/jobs/{id} until the job is in state.
func waitJobState(t *testing.T, c *http.Client, d *daemon, id, state string) reply {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := jsonCall(t, c, d, "GET", "/v1/jobs/"+id, nil)
		if r.code == http.StatusOK && r.body["state"] == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %d %s, want state %s within 30s", id, r.code, r.raw, state)
		}
		time.Sleep(20 * time.Millisecond) // polling the API
	}
}

// GET /v1/jobs?state=dead without a queue lists the dead jobs of every
// queue (queue by queue in name order), paged with a cursor that resumes
// across queues; the "list without queue" refusal is gone.
func TestListDeadAcrossQueues(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Queues = "a=1,b=1,c=1" })
	want := map[string]bool{}
	for _, q := range []string{"c", "a", "b"} {
		for i := range 2 {
			id := fmt.Sprintf("dead-%s-%d", q, i)
			if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": id, "queue": q, "kind": "fail", "max_attempts": 1}); r.code != http.StatusCreated {
				t.Fatalf("submit: %d %s", r.code, r.raw)
			}
			want[id] = true
		}
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "alive", "queue": "b", "kind": "sleep", "payload_text": "1h"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	for id := range want {
		waitJobState(t, c, d, id, "dead")
	}
	var got []string
	cursor, pages := "", 0
	for {
		r := jsonCall(t, c, d, "GET", "/v1/jobs?state=dead&limit=4&cursor="+cursor, nil)
		if r.code != http.StatusOK {
			t.Fatalf("list dead: %d %s", r.code, r.raw)
		}
		pages++
		for _, j := range r.body["jobs"].([]any) {
			job := j.(map[string]any)
			if job["state"] != "dead" {
				t.Fatalf("list dead: job %v in state %v", job["id"], job["state"])
			}
			got = append(got, job["id"].(string))
		}
		if cursor = fmt.Sprint(r.body["next"]); cursor == "" {
			break
		}
		if pages > 5 {
			t.Fatalf("list dead: more than 5 pages of 4 for 6 jobs: %v", got)
		}
	}
	if fmt.Sprint(got) != "[dead-a-0 dead-a-1 dead-b-0 dead-b-1 dead-c-0 dead-c-1]" {
		t.Fatalf("dead jobs across queues: %v, want the 6 in queue order", got)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/jobs?cursor=nonsense", nil); r.code != http.StatusBadRequest {
		t.Fatalf("list with a foreign cursor: %d %s, want 400", r.code, r.raw)
	}
}

// GET /v1/watch: event= filters by event kind, kind= by job kind (as kind=
// means everywhere else); an old kind=<event kind> is refused with a 400
// naming event=, never silently read as a job kind.
func TestWatchEventAndJobKind(t *testing.T) {
	d, c := startTest(t, nil)
	for _, j := range []map[string]any{{"id": "w-echo", "queue": "work", "kind": "echo"}, {"id": "w-sha", "queue": "work", "kind": "sha256"}} {
		if r := jsonCall(t, c, d, "POST", "/v1/jobs", j); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
	}
	waitJobState(t, c, d, "w-echo", "succeeded")
	waitJobState(t, c, d, "w-sha", "succeeded")
	// Every event of the sha256 job, and only of it: submitted, claimed,
	// acked.
	evs := watchEvents(t, c, d, "from=1&kind=sha256", 3)
	for _, ev := range evs {
		if ev["job_kind"] != "sha256" || ev["job"] != "w-sha" {
			t.Fatalf("kind=sha256 delivered %v", ev)
		}
	}
	if evs[0]["kind"] != "submitted" || evs[2]["kind"] != "acked" {
		t.Fatalf("kind=sha256: events %v, want submitted .. acked", evs)
	}
	// Acked events of every job kind.
	for _, ev := range watchEvents(t, c, d, "from=1&event=acked", 2) {
		if ev["kind"] != "acked" {
			t.Fatalf("event=acked delivered %v", ev)
		}
	}
	// Both: the echo job's acked event only.
	if evs := watchEvents(t, c, d, "from=1&event=acked&kind=echo", 1); evs[0]["job"] != "w-echo" {
		t.Fatalf("event=acked&kind=echo delivered %v", evs)
	}
	r := jsonCall(t, c, d, "GET", "/v1/watch?kind=acked", nil)
	if reason := fmt.Sprint(r.body["reason"]); r.code != http.StatusBadRequest || !strings.Contains(reason, "event=acked") {
		t.Fatalf("watch?kind=acked: %d %s, want 400 naming event=acked", r.code, r.raw)
	}
}

// watchEvents reads n events (their data objects) of GET /v1/watch?query.
func watchEvents(t *testing.T, c *http.Client, d *daemon, query string, n int) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", d.URL()+"/v1/watch?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch?%s: %d", query, resp.StatusCode)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for len(out) < n && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if len(out) < n {
		t.Fatalf("watch?%s: %d events before the stream ended (%v), want %d", query, len(out), sc.Err(), n)
	}
	return out
}

// The ack reply gives the job's state; a repeated ack (the same request,
// answered 200 again) gives it too, and no deadline: the lease ended (it
// once answered deadline 1970-01-01). Extend gives the lease's new
// deadline; nak and term the state they left.
func TestLeaseRepliesGiveStateAndNoFalseDeadline(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	claim := func(id string) float64 {
		t.Helper()
		if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": id, "queue": "work", "kind": "echo", "max_attempts": 5}); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
		r := jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "w", "wait": "5s"})
		leases, _ := r.body["leases"].([]any)
		if r.code != http.StatusOK || len(leases) != 1 {
			t.Fatalf("claim: %d %s", r.code, r.raw)
		}
		return leases[0].(map[string]any)["token"].(float64)
	}
	settle := func(id, op string, body map[string]any, state string, deadline bool) {
		t.Helper()
		r := jsonCall(t, c, d, "POST", "/v1/jobs/"+id+"/"+op, body)
		_, hasDeadline := r.body["deadline"]
		if r.code != http.StatusOK || r.body["state"] != state || hasDeadline != deadline || strings.Contains(r.raw, `"1970-01-01`) {
			t.Fatalf("%s %s: %d %s, want 200 state %s, deadline given: %v", op, id, r.code, r.raw, state, deadline)
		}
	}
	tok := claim("s1")
	settle("s1", "extend", map[string]any{"token": tok}, "running", true)
	settle("s1", "ack", map[string]any{"token": tok, "result_text": "ok"}, "succeeded", false)
	settle("s1", "ack", map[string]any{"token": tok, "result_text": "ok"}, "succeeded", false) // the repeat
	tok = claim("s2")
	settle("s2", "nak", map[string]any{"token": tok, "delay": "1h"}, "scheduled", false)
	tok = claim("s3")
	settle("s3", "term", map[string]any{"token": tok, "reason": "no"}, "dead", false)
	settle("s3", "term", map[string]any{"token": tok, "reason": "no"}, "dead", false) // the repeat
}

// A job of a kind no worker handles is reported unserved once it waited
// -unserved-after with no claim of its queue and kind: in GET /v1/stats
// ("unserved", with a hint) and as jobd_pending_unserved_jobs{queue,kind};
// a kind the workers serve never is, and the report goes when the job is
// claimed.
func TestUnservedKindIsReported(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.UnservedAfter = 300 * time.Millisecond })
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "u1", "queue": "work", "kind": "nosuch"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "s1", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	waitJobState(t, c, d, "s1", "succeeded")
	var unserved []any
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := jsonCall(t, c, d, "GET", "/v1/stats", nil)
		unserved, _ = r.body["unserved"].([]any)
		if len(unserved) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats: %s, want kind nosuch reported unserved within 20s", r.raw)
		}
		time.Sleep(50 * time.Millisecond) // polling the API
	}
	u := unserved[0].(map[string]any)
	if len(unserved) != 1 || u["queue"] != "work" || u["kind"] != "nosuch" || u["pending"] != 1.0 || !strings.Contains(fmt.Sprint(u["hint"]), "no worker serves this kind") {
		t.Fatalf("unserved: %v, want only work/nosuch with 1 pending job and a hint", unserved)
	}
	r := call(t, c, "GET", d.URL()+"/metrics", testToken, "", nil)
	if !strings.Contains(r.raw, `jobd_pending_unserved_jobs{kind="nosuch",queue="work"} 1`) || strings.Contains(r.raw, `jobd_pending_unserved_jobs{kind="echo"`) {
		t.Fatalf("metrics: no jobd_pending_unserved_jobs for work/nosuch (or one for echo)")
	}
	// A worker claims it: no longer unserved.
	r = jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "w", "wait": "5s"})
	if leases, _ := r.body["leases"].([]any); r.code != http.StatusOK || len(leases) != 1 {
		t.Fatalf("claim: %d %s", r.code, r.raw)
	}
	if r = jsonCall(t, c, d, "GET", "/v1/stats", nil); r.body["unserved"] != nil {
		t.Fatalf("stats after the claim: %s, want no unserved", r.raw)
	}
}

// The unserved observation's rules, on a fake clock: a claim of the pair
// restarts its wait; a paused queue is never unserved; a scheduled job
// whose time came waits as a pending one; a pair with nothing waiting is
// forgotten.
func TestServedKindsRules(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newServedKinds(time.Minute)
	q := func(paused bool, kinds ...fsm.KindInfo) []fsm.QueueInfo {
		return []fsm.QueueInfo{{Name: "q", Paused: paused, Kinds: kinds}}
	}
	pending := fsm.KindInfo{Kind: "k", Pending: 2}
	if u := s.observe(q(false, pending), t0); len(u) != 0 {
		t.Fatalf("at once: %v", u)
	}
	if u := s.observe(q(false, pending), t0.Add(59*time.Second)); len(u) != 0 {
		t.Fatalf("after 59s: %v", u)
	}
	s.claimed("q", "k", t0.Add(50*time.Second))
	if u := s.observe(q(false, pending), t0.Add(100*time.Second)); len(u) != 0 {
		t.Fatalf("50s after a claim: %v", u)
	}
	if u := s.observe(q(false, pending), t0.Add(110*time.Second)); len(u) != 1 || u[0].Pending != 2 || !u[0].Since.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("60s after the claim: %v, want k unserved since the claim", u)
	}
	if u := s.observe(q(true, pending), t0.Add(200*time.Second)); len(u) != 0 {
		t.Fatalf("paused queue: %v", u)
	}
	// Paused, the pair was forgotten: its wait starts again.
	if u := s.observe(q(false, pending), t0.Add(210*time.Second)); len(u) != 0 {
		t.Fatalf("resumed: %v", u)
	}
	due := fsm.KindInfo{Kind: "d", Scheduled: 1, NextRunAt: t0.Add(300 * time.Second)}
	s.observe(q(false, due), t0.Add(250*time.Second))
	if u := s.observe(q(false, due), t0.Add(400*time.Second)); len(u) != 0 {
		t.Fatalf("due for 100s but seen due only now: %v", u)
	}
	if u := s.observe(q(false, due), t0.Add(460*time.Second)); len(u) != 1 || u[0].Kind != "d" || !u[0].DueScheduled {
		t.Fatalf("due and unclaimed for 60s: %v", u)
	}
	if u := s.observe(q(false, fsm.KindInfo{Kind: "d", Scheduled: 1, NextRunAt: t0.Add(time.Hour)}), t0.Add(470*time.Second)); len(u) != 0 {
		t.Fatalf("not due: %v", u)
	}
}
