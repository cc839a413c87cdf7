package main

import (
	"net/http"
	"strings"
	"testing"
)

// A job after its parents waits until they succeeded; bad parents are
// refused with 400 and a reason, creating nothing.
func TestDependencyRoutes(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	submit := func(body map[string]any) reply {
		t.Helper()
		return jsonCall(t, c, d, "POST", "/v1/jobs", body)
	}
	if r := submit(map[string]any{"id": "p", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("parent: %d %s", r.code, r.raw)
	}
	r := submit(map[string]any{"id": "c", "queue": "work", "kind": "echo", "after": []string{"p"}, "on_parent_failure": "dead"})
	if r.code != http.StatusCreated || r.body["job"].(map[string]any)["state"] != "waiting" {
		t.Fatalf("child: %d %s", r.code, r.raw)
	}
	for _, bad := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"id": "u", "queue": "work", "kind": "echo", "after": []string{"nope"}}, "unknown parent"},
		{map[string]any{"id": "s", "queue": "work", "kind": "echo", "after": []string{"s"}}, "cycle"},
		{map[string]any{"id": "t", "queue": "work", "kind": "echo", "after": []string{"p", "p"}}, "twice"},
		{map[string]any{"id": "v", "queue": "work", "kind": "echo", "after": []string{"p"}, "on_parent_failure": "later"}, "on_parent_failure"},
		{map[string]any{"id": "w", "queue": "work", "kind": "echo", "after": []string{"bad id"}}, "after[0]"},
	} {
		r := submit(bad.body)
		if r.code != http.StatusBadRequest || !strings.Contains(r.raw, bad.want) {
			t.Errorf("%v: %d %s, want 400 naming %q", bad.body, r.code, r.raw, bad.want)
		}
	}
	// A cycle among the jobs of one batch submit refuses those jobs.
	r = jsonCall(t, c, d, "POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
		{"id": "x", "queue": "work", "kind": "echo", "after": []string{"y"}},
		{"id": "y", "queue": "work", "kind": "echo", "after": []string{"x"}},
	}})
	if r.code != http.StatusMultiStatus || !strings.Contains(r.raw, "dependency cycle") {
		t.Fatalf("cycle: %d %s", r.code, r.raw)
	}
	if n := jobCount(t, c, d); n != 2 {
		t.Fatalf("%d jobs, want the parent and its child", n)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/jobs/p/dependents", nil); r.code != http.StatusOK || !strings.Contains(r.raw, `"dependents":["c"]`) {
		t.Fatalf("dependents: %d %s", r.code, r.raw)
	}
	cl := jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "max": 5, "worker": "t"})
	if cl.code != http.StatusOK || strings.Contains(cl.raw, `"id":"c"`) || !strings.Contains(cl.raw, `"id":"p"`) {
		t.Fatalf("claim: %d %s, want p alone", cl.code, cl.raw)
	}
	tok := cl.body["leases"].([]any)[0].(map[string]any)["token"]
	if r := jsonCall(t, c, d, "POST", "/v1/jobs/p/term", map[string]any{"token": tok, "reason": "no"}); r.code != http.StatusOK {
		t.Fatalf("term: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/jobs/c", nil); r.body["state"] != "dead" || !strings.Contains(r.raw, `parent \"p\" ended dead`) {
		t.Fatalf("child after its parent died: %s", r.raw)
	}
	if r := jsonCall(t, c, d, "POST", "/v1/jobs/c/retry", nil); r.code != http.StatusBadRequest || !strings.Contains(r.raw, "parent") {
		t.Fatalf("retry of the child of a dead parent: %d %s", r.code, r.raw)
	}
}

// A batch reports its members and completion; a bad batch is refused.
func TestBatchRoutes(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false })
	body := map[string]any{"id": "nightly", "jobs": []map[string]any{
		{"id": "n1", "queue": "work", "kind": "echo"}, {"id": "n2", "queue": "work", "kind": "echo", "after": []string{"n1"}},
	}, "completion": map[string]any{"id": "report", "queue": "done", "kind": "echo"}}
	r := jsonCall(t, c, d, "POST", "/v1/batches", body)
	if r.code != http.StatusCreated || r.body["batch"].(map[string]any)["members"] != float64(2) {
		t.Fatalf("create: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "POST", "/v1/batches", body); r.code != http.StatusCreated {
		t.Fatalf("the same request again: %d %s, want its own batch", r.code, r.raw)
	}
	body["jobs"] = []map[string]any{{"id": "other", "queue": "work", "kind": "echo"}}
	if r := jsonCall(t, c, d, "POST", "/v1/batches", body); r.code != http.StatusConflict || r.body["error"] != "batch_exists" {
		t.Fatalf("another request, same ID: %d %s", r.code, r.raw)
	}
	for _, bad := range []map[string]any{
		{"id": "", "jobs": []map[string]any{}},
		{"id": "a b", "jobs": []map[string]any{}},
		{"id": "ok", "jobs": []map[string]any{}, "completion": map[string]any{"queue": "q", "kind": "k", "after": []string{"n1"}}},
		{"id": "ok", "jobs": []map[string]any{{"queue": "", "kind": "k"}}},
	} {
		if r := jsonCall(t, c, d, "POST", "/v1/batches", bad); r.code != http.StatusBadRequest {
			t.Errorf("%v: %d %s, want 400", bad, r.code, r.raw)
		}
	}
	for _, id := range []string{"n1", "n2"} {
		cl := jsonCall(t, c, d, "POST", "/v1/claim", map[string]any{"queues": []string{"work"}, "worker": "t"})
		l := cl.body["leases"].([]any)[0].(map[string]any)
		if j := l["job"].(map[string]any); j["id"] != id {
			t.Fatalf("claimed %v, want %s", j["id"], id)
		}
		if r := jsonCall(t, c, d, "POST", "/v1/jobs/"+id+"/ack", map[string]any{"token": l["token"]}); r.code != http.StatusOK {
			t.Fatalf("ack: %d %s", r.code, r.raw)
		}
	}
	r = jsonCall(t, c, d, "GET", "/v1/batches/nightly", nil)
	if r.code != http.StatusOK || r.body["done"] != true || r.body["succeeded"] != float64(2) || r.body["completion_job"] != "report" {
		t.Fatalf("batch: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/jobs/report", nil); r.code != http.StatusOK || r.body["state"] != "pending" {
		t.Fatalf("completion job: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/batches/none", nil); r.code != http.StatusNotFound {
		t.Fatalf("unknown batch: %d %s", r.code, r.raw)
	}
	if r := jsonCall(t, c, d, "GET", "/v1/batches", nil); r.code != http.StatusOK || !strings.Contains(r.raw, `"id":"nightly"`) {
		t.Fatalf("list: %d %s", r.code, r.raw)
	}
}
