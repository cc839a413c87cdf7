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
