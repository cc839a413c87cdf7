package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// TestOutcomeUnknownAdvicePerRoute: a 503 outcome_unknown tells the caller
// what to do for its own operation: a claim has no job ID, an ack is
// retried with its token.
func TestOutcomeUnknownAdvicePerRoute(t *testing.T) {
	unknown := fmt.Errorf("%w: %w: leadership lost", jobraft.ErrOutcomeUnknown, raft.ErrIndeterminate)
	submitUnknown := &jobraft.SubmitError{ID: "J1", Class: jobraft.ErrMayExist, Cause: errors.New("context deadline exceeded")}
	for _, tc := range []struct {
		route       string
		advice      string
		err         error
		want, avoid string
	}{
		{"submit", adviceSubmit, submitUnknown, `job ID "J1"`, "token"},
		{"claim", adviceClaim, unknown, "claim again", "job ID"},
		{"ack", adviceSettle, unknown, "same token", "job ID"},
		{"nak", adviceSettle, unknown, "same token", "job ID"},
		{"term", adviceSettle, unknown, "same token", "job ID"},
		{"extend", adviceExtend, unknown, "same token", "job ID"},
		{"cancel", adviceCancel, unknown, "retry the cancel", "job ID"},
		{"retry", adviceRetry, unknown, "GET the job", "job ID"},
	} {
		code, kind, reason := classify(tc.err, tc.advice)
		if code != http.StatusServiceUnavailable || kind != "outcome_unknown" {
			t.Errorf("%s: %d %s, want 503 outcome_unknown", tc.route, code, kind)
		}
		if !strings.Contains(reason, tc.want) || strings.Contains(reason, tc.avoid) {
			t.Errorf("%s: reason %q: want %q in it and not %q", tc.route, reason, tc.want, tc.avoid)
		}
	}
}

// TestLeaderNamedByIDAndAddress: a proposal error names the leader by ID
// (local proposal) or address (forwarded); the reply names it by both.
func TestLeaderNamedByIDAndAddress(t *testing.T) {
	members := []raft.Member{{ID: "m1", Address: "127.0.0.1:7001"}, {ID: "m2", Address: "127.0.0.1:7002"}}
	for _, leader := range []string{"m2", "127.0.0.1:7002"} {
		err := fmt.Errorf("%w: %w", jobraft.ErrOutcomeUnknown,
			&raft.ProposeError{Class: raft.ErrIndeterminate, Leader: leader, Cause: io.EOF})
		_, _, reason := classify(err, adviceClaim)
		reason = nameLeaders(reason, members)
		if !strings.Contains(reason, "(leader m2 (127.0.0.1:7002))") || strings.Contains(reason, `"`+leader+`"`) {
			t.Errorf("leader %q: reason %q, want it named m2 (127.0.0.1:7002)", leader, reason)
		}
	}
	none := (&raft.ProposeError{Class: raft.ErrRejected, Cause: raft.ErrNoLeader}).Error()
	if got := nameLeaders(none, members); !strings.Contains(got, "(no leader known)") {
		t.Errorf("no leader: %q", got)
	}
	unknown := (&raft.ProposeError{Class: raft.ErrRejected, Leader: "m9", Cause: io.EOF}).Error()
	if got := nameLeaders(unknown, members); got != unknown {
		t.Errorf("a leader not in the configuration was rewritten: %q", got)
	}
}

// TestLoneSurrogate is the raw-JSON scan against the escapes it must find
// and those it must leave alone.
func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		json string
		lone bool
	}{
		{`"\ud800"`, true},
		{`"\uDBFF"`, true},
		{`"\udc00"`, true},
		{`"\ud800\u0041"`, true},
		{`"\ud800\ud800"`, true},
		{`"\ud800\\udc00"`, true}, // the second is an escaped backslash and text
		{`"a\ud83d\ude00b"`, false},
		{`"\\ud800"`, false},
		{`"\\\ud83d\ude00"`, false},
		{`{"\ud800":1}`, true},
		{`{"a":"\u00e9","b":"\u0000"}`, false},
		{`"ud800 \"\ud800\""`, true},
	} {
		if _, got := loneSurrogate([]byte(tc.json)); got != tc.lone {
			t.Errorf("%s: lone %v, want %v", tc.json, got, tc.lone)
		}
	}
}

// TestDivergedReasonNamesLeader: readyz's diverged reply names the leader
// "ID (address)" like every other reply (it named the ID alone).
func TestDivergedReasonNamesLeader(t *testing.T) {
	members := []raft.Member{{ID: "m1", Address: "127.0.0.1:7001"}, {ID: "m2", Address: "127.0.0.1:7002"}}
	got := divergedReason(raft.Divergence{Index: 42, LocalTerm: 3, LeaderTerm: 5, Leader: "m2"}, members)
	for _, want := range []string{"(leader m2 (127.0.0.1:7002))", "index 42", "local term 3", "leader term 5", "re-seed"} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q lacks %q", got, want)
		}
	}
}
