package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// The operator's first hour (issue 29): what a new user trying jobctl ran
// into.

// TestJobctlHelpAndUsage: help lists every command and the exit statuses;
// help COMMAND shows its flags, each default once; a usage error says what
// is missing.
func TestJobctlHelpAndUsage(t *testing.T) {
	binaries(t)
	out, errs, code := jobctl(t, nil, "help")
	if code != exitOK || errs != "" {
		t.Fatalf("help: exit %d, stderr %q", code, errs)
	}
	for _, name := range commandOrder {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s", name)
		}
	}
	for _, want := range []string{"7  no endpoint is a jobd API", "5  outcome unknown", "jobctl help COMMAND"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if strings.Count(out, "default: $JOBD_ENDPOINTS") != 1 || strings.Contains(out, `(default "http`) {
		t.Errorf("help prints the endpoints' default other than once:\n%s", out)
	}
	out, _, code = jobctl(t, nil, "help", "ack")
	if code != exitOK || !strings.Contains(out, "usage: jobctl ack") || !strings.Contains(out, "-lease") || !strings.Contains(out, "-result-file") {
		t.Fatalf("help ack: exit %d, %q", code, out)
	}
	if _, errs, code := jobctl(t, nil, "help", "frobnicate"); code != exitUsage || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("help of an unknown command: exit %d, %q", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "-kind", "echo"}, "missing -queue"},
		{[]string{"submit"}, "missing -queue and -kind"},
		{[]string{"list", "work"}, "list takes no arguments"},
		{[]string{"get"}, "missing the job ID"},
		{[]string{"ack", "j1"}, "missing -lease TOKEN"},
		{[]string{"claim"}, "missing -queue"},
		{[]string{"backup"}, "missing -o FILE"},
		{[]string{"member-add", "n9"}, "missing the member's RAFT-ADDR"},
	} {
		// No endpoint listens: the usage error comes first all the same.
		_, errs, code := jobctl(t, nil, append([]string{"-endpoints", "http://127.0.0.1:1"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("jobctl %v: exit %d, %q; want %d saying %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// firstHour runs on TestJobctlCommands's cluster: configuration mistakes
// are exit 7 naming the mistake, never 5 "outcome unknown", for a read and
// for a write; claim, ack, nak, extend and term work by hand; an error
// reads reason first, its class said once.
func firstHour(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	m := c.Members[0]
	tok := []string{"-token-file", c.Opts.Dir + "/token", "-timeout", "10s"}
	for _, tc := range []struct {
		endpoint, want string
	}{
		{"http://" + m.RaftAddr, "a member's raft port?"},
		{"https://" + m.HTTPAddr, "it speaks http: use http://" + m.HTTPAddr},
	} {
		for _, cmd := range [][]string{{"stats"}, {"cancel", "echo-1"}} {
			_, errs, code := jobctl(t, nil, append(append([]string{"-endpoints", tc.endpoint}, tok...), cmd...)...)
			if code != exitEndpoint || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "nothing was sent to jobd") {
				t.Errorf("jobctl %v at %s: exit %d, %q; want %d saying %q", cmd, tc.endpoint, code, errs, exitEndpoint, tc.want)
			}
		}
	}
	// One wrong endpoint among right ones: the command runs.
	if _, errs, code := jobctl(t, nil, append([]string{"-endpoints", "http://" + m.RaftAddr + ",http://" + m.HTTPAddr}, append(tok, "stats")...)...); code != exitOK {
		t.Errorf("stats with one good endpoint of two: exit %d, %q", code, errs)
	}

	// claim, extend, ack by hand; then nak and term.
	for _, id := range []string{"hand-1", "hand-2", "hand-3"} {
		var sub client.Submitted
		mustJSON(t, c, &sub, "submit", "-queue", "manual", "-kind", "by-hand", "-id", id, "-payload", "p")
	}
	lease := func() (string, string) {
		t.Helper()
		var ls []client.Claimed
		mustJSON(t, c, &ls, "claim", "-queue", "manual", "-wait", "5s")
		if len(ls) != 1 {
			t.Fatalf("claim: %+v", ls)
		}
		return ls[0].Job.ID, strconv.FormatUint(ls[0].Token, 10)
	}
	id, token := lease()
	if out, errs, code := jobctl(t, c, "extend", id, "-lease", token); code != exitOK || !strings.Contains(out, "extended") || !strings.Contains(out, "lease until") {
		t.Fatalf("extend: exit %d, %q %q", code, out, errs)
	}
	out, errs, code := jobctl(t, c, "ack", id, "-lease", token, "-result", "done by hand")
	if code != exitOK || !strings.Contains(out, id+" acked") || !strings.Contains(out, "job state succeeded") || strings.Contains(out, "lease until") {
		t.Fatalf("ack: exit %d, %q %q", code, out, errs)
	}
	if out, _, _ := jobctl(t, c, "get", id); !strings.Contains(out, "12 bytes: done by hand") {
		t.Fatalf("get after the ack: %q", out)
	}
	// Another result for the same lease: refused, the reason first and
	// the class said once.
	_, errs, code = jobctl(t, c, "ack", id, "-lease", token, "-result", "other")
	if code != exitRefused || !strings.HasPrefix(errs, "jobctl ack: job") || strings.Contains(errs, "fsm:") || strings.Count(errs, "stale") != 1 {
		t.Fatalf("ack with another result: exit %d, %q", code, errs)
	}
	id, token = lease()
	if out, errs, code := jobctl(t, c, "nak", id, "-lease", token, "-delay", "1h", "-error", "later"); code != exitOK || !strings.Contains(out, "job state scheduled") {
		t.Fatalf("nak: exit %d, %q %q", code, out, errs)
	}
	id, token = lease()
	var s client.Settled
	out, errs, code = jobctl(t, c, "term", id, "-lease", token, "-reason", "no", "-json")
	if code != exitOK || json.Unmarshal([]byte(out), &s) != nil || s.State != "dead" || !s.Deadline.IsZero() {
		t.Fatalf("term -json: exit %d, %q %q", code, out, errs)
	}
}
