package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
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
