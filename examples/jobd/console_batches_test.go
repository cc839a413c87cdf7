package main

import (
	"net/http"
	"strings"
	"testing"
)

// The console shows a job's parents, the ones it waits for, its
// dependents and its batch, and a batch's progress.
func TestConsoleShowsDependenciesAndBatches(t *testing.T) {
	d, api := startTest(t, func(o *options) { o.Workers = false })
	wantCode(t, jsonCall(t, api, d, "POST", "/v1/batches", map[string]any{"id": "nightly", "jobs": []map[string]any{
		{"id": "p", "queue": "work", "kind": "echo"}, {"id": "c", "queue": "work", "kind": "echo", "after": []string{"p"}},
	}, "completion": map[string]any{"id": "report", "queue": "done", "kind": "echo"}}), http.StatusCreated)
	c := consoleClient(t, d)
	_, body, _ := getPage(t, c, d.URL()+"/console/job?id=c")
	for _, want := range []string{`id="parents"`, `href="/console/job?id=p"`, `<span class="unmet">p</span>`, `id="batch">nightly</a>`, `>waiting<`} {
		if !strings.Contains(body, want) {
			t.Errorf("job page of c lacks %s", want)
		}
	}
	if _, body, _ := getPage(t, c, d.URL()+"/console/job?id=p"); !strings.Contains(body, `class="dependent">c</a>`) {
		t.Error("job page of p does not list its dependent c")
	}
	code, body, _ := getPage(t, c, d.URL()+"/console/batches")
	if code != http.StatusOK || !strings.Contains(body, `data-batch="nightly"`) || !strings.Contains(body, "0 of 2 ended") || !strings.Contains(body, ">open<") {
		t.Fatalf("batches page: %d\n%s", code, body)
	}
	if code, _, _ := getPage(t, c, d.URL()+"/console/batches?id=none"); code != http.StatusNotFound {
		t.Errorf("unknown batch: %d", code)
	}
}
