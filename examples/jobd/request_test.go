package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/examples/client"
)

// A field of the wrong JSON type is refused with a reason that names the
// field by its JSON key and never the Go types behind it (the request types
// embed the client's: their names are no part of the API).
func TestDecodeTypeErrorNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		body, field string
		into        any
	}{
		{`{"queue":"q","kind":"k","priority":"high"}`, "priority", &submitJSON{}},
		{`{"jobs":[{"queue":"q","kind":"k","max_attempts":-1}]}`, "max_attempts", &struct {
			Jobs []submitJSON `json:"jobs"`
		}{}},
		{`{"queues":"q","worker":"w"}`, "queues", new(client.ClaimRequest)},
		{`{"token":"1"}`, "token", &leaseReq{}},
	} {
		r := httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		code, kind, reason := classify(decode(r, tc.into, false), "")
		if code != 400 || kind != "bad_request" || !strings.Contains(reason, `field "`+tc.field+`"`) {
			t.Errorf("%s: %d %s %q, want 400 bad_request naming field %q", tc.body, code, kind, reason, tc.field)
		}
		for _, goName := range []string{"Go struct", "submitJSON", "SubmitRequest", "ClaimRequest", "SettleRequest", "leaseReq"} {
			if strings.Contains(reason, goName) {
				t.Errorf("%s: reason %q names %s", tc.body, reason, goName)
			}
		}
	}
}
