package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startProcCluster starts n jobd processes bootstrapping one cluster
// (plain TCP on loopback, no workers) and waits until each is ready.
func startProcCluster(t *testing.T, n int, extra ...string) []*proc {
	t.Helper()
	bin := jobdBinary(t)
	raftAddrs := make([]string, n)
	var peers []string
	for i := range n {
		raftAddrs[i] = freeAddr(t)
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, raftAddrs[i]))
	}
	procs := make([]*proc, n)
	for i := range n {
		args := append([]string{"-id", fmt.Sprintf("n%d", i+1), "-data", t.TempDir(), "-raft-addr", raftAddrs[i],
			"-http-addr", freeAddr(t), "-peers", strings.Join(peers, ","), "-bootstrap", "-workers=false"}, extra...)
		procs[i] = startProc(t, bin, args...)
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	return procs
}

// TestRemovedMemberExits: a member removed from a cluster of jobd
// processes learns it and exits with status 3 (exitRemoved) and a line
// saying it was removed; the others serve on. Before, it ran on, its
// /readyz saying "no leader known".
func TestRemovedMemberExits(t *testing.T) {
	procs := startProcCluster(t, 3)
	c := &http.Client{Timeout: 30 * time.Second}
	code, _, body, err := send(c, "DELETE", procs[0].http+"/v1/cluster/members/n3", testToken, "", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("DELETE n3: %d %s %v", code, body, err)
	}
	if code := procs[2].wait(t, 30*time.Second); code != exitRemoved {
		t.Fatalf("the removed member exited %d, want %d:\n%s", code, exitRemoved, procs[2].stderr)
	}
	if out := procs[2].stderr.String(); !strings.Contains(out, "this member was removed from the cluster") {
		t.Fatalf("the removed member did not say why it exits:\n%s", out)
	}
	for _, p := range procs[:2] {
		p.waitReady(t)
	}
	code, _, body, err = send(c, "POST", procs[1].http+"/v1/jobs", testToken, "application/json", `{"queue":"q","kind":"echo"}`)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("submit after the removal: %d %s %v", code, body, err)
	}
}

// TestMetricsAfterRemoval: the leader of jobd processes stops exporting
// the catch-up series of a member once it is removed (it exported
// jobraft_catchup_lag_entries{member="n3"} 0 for ever); jobd_raft_diverged
// and jobd_raft_log_failed exist once (no jobraft_raft_* copy); the
// request counter's route label is the path pattern, the method a label
// of its own.
func TestMetricsAfterRemoval(t *testing.T) {
	procs := startProcCluster(t, 3)
	c := &http.Client{Timeout: 30 * time.Second}
	leader := -1
	for i, p := range procs {
		if _, _, body, err := send(c, "GET", p.http+"/readyz", "", "", ""); err == nil && strings.Contains(body, `"leader":"n`+fmt.Sprint(i+1)+`"`) {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member reports itself as the leader")
	}
	removed := (leader + 1) % 3
	id := fmt.Sprintf("n%d", removed+1)
	series := `jobraft_catchup_lag_entries{member="` + id + `"}`
	scrape := func() string {
		t.Helper()
		code, _, body, err := send(c, "GET", procs[leader].http+"/metrics", testToken, "", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("/metrics: %d %v", code, err)
		}
		return body
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(scrape(), series) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader never exported %s", series)
		}
		time.Sleep(100 * time.Millisecond) // polling the scrape
	}
	if code, _, body, err := send(c, "DELETE", procs[leader].http+"/v1/cluster/members/"+id, testToken, "", ""); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE %s: %d %s %v", id, code, body, err)
	}
	body := scrape()
	if strings.Contains(body, series) {
		t.Errorf("the leader still exports %s after the removal", series)
	}
	for _, fam := range []string{"jobd_raft_diverged", "jobd_raft_log_failed"} {
		if !strings.Contains(body, "\n"+fam+" 0\n") {
			t.Errorf("%s missing", fam)
		}
	}
	for _, dup := range []string{"jobraft_raft_diverged", "jobraft_raft_log_failed"} {
		if strings.Contains(body, dup) {
			t.Errorf("%s exported besides jobd's own", dup)
		}
	}
	want := `jobd_http_requests_total{code="200",method="DELETE",route="/v1/cluster/members/{id}"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("no %s in:\n%s", want, grepLines(body, "jobd_http_requests_total"))
	}
}

// grepLines returns the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
