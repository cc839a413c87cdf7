package main

import (
	"strings"
	"testing"
)

// A healthy member exports jobd_raft_diverged 0 and no "diverged" in its
// cluster status (the field is raft.Status.Diverged, omitted when nil; the
// diverged case itself is raft's TestDivergedMemberIsLoudAndRecoverable).
func TestDivergedGaugeAndStatusOfAHealthyMember(t *testing.T) {
	d, c := startTest(t, nil)
	r := call(t, c, "GET", d.URL()+"/metrics", testToken, "", nil)
	if r.code != 200 || !strings.Contains(r.raw, "\njobd_raft_diverged 0\n") {
		t.Fatalf("/metrics: %d, jobd_raft_diverged 0 missing", r.code)
	}
	st := jsonCall(t, c, d, "GET", "/v1/cluster/status?members=0", nil)
	self, _ := st.body["self"].(map[string]any)
	if st.code != 200 || self == nil || self["ready"] != true {
		t.Fatalf("/v1/cluster/status: %d %s", st.code, st.raw)
	}
	if _, ok := self["diverged"]; ok {
		t.Fatalf("healthy member reports diverged: %s", st.raw)
	}
}
