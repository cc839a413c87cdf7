package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// TestJobctlCommands runs the built jobctl against a live 3-member jobd
// cluster: every command, in table and -json form, and each documented
// exit status.
func TestJobctlCommands(t *testing.T) {
	binaries(t)
	c, cl := startCluster(t, t.TempDir(), []string{"-queues", "work=2", "-lease-ttl", "5s"}, nil)

	// submit, get: an echo job runs to success.
	var sub client.Submitted
	mustJSON(t, c, &sub, "submit", "-queue", "work", "-kind", "echo", "-id", "echo-1", "-payload", "hello")
	if sub.Job.ID != "echo-1" || sub.Duplicate {
		t.Fatalf("submit: %+v", sub)
	}
	j := waitState(t, c, "echo-1", "succeeded")
	if !strings.Contains(string(j.Result), `"echo":"hello"`) {
		t.Fatalf("echo result %s", j.Result)
	}
	// The same ID again: a duplicate, exit 0, and the table form says so.
	out, _, code := jobctl(t, c, "submit", "-queue", "work", "-kind", "echo", "-id", "echo-1", "-payload", "hello")
	if code != exitOK || !strings.Contains(out, "echo-1 existed already") {
		t.Fatalf("duplicate submit: exit %d, %q", code, out)
	}
	out, _, code = jobctl(t, c, "get", "echo-1")
	// The table shows the payload and the result as text (valid UTF-8).
	if code != exitOK || !strings.Contains(out, "succeeded") || !strings.Contains(out, "5 bytes: hello") || !strings.Contains(out, `"echo":"hello"`) {
		t.Fatalf("get table: exit %d, %q", code, out)
	}

	// A job that always fails goes dead; retry moves it back; cancel
	// cancels it; a second cancel is refused (exit 4).
	mustJSON(t, c, &sub, "submit", "-queue", "work", "-kind", "fail", "-id", "fail-1", "-max-attempts", "1")
	waitState(t, c, "fail-1", "dead")
	if err := runPause(t, c, "pause", "work"); err != "" {
		t.Fatal(err)
	}
	var rj client.Job
	mustJSON(t, c, &rj, "retry", "fail-1")
	if rj.State != "pending" {
		t.Fatalf("retry: state %s, want pending (the queue is paused)", rj.State)
	}
	var st client.Stats
	mustJSON(t, c, &st, "stats")
	if len(st.Queues) != 1 || !st.Queues[0].Paused || st.Queues[0].Counts["pending"] != 1 {
		t.Fatalf("stats: %+v", st)
	}
	out, _, code = jobctl(t, c, "cancel", "fail-1", "-reason", "test")
	if code != exitOK || !strings.Contains(out, "fail-1 canceled (state canceled)") {
		t.Fatalf("cancel: exit %d, %q", code, out)
	}
	if _, errs, code := jobctl(t, c, "cancel", "fail-1"); code != exitRefused || !strings.Contains(errs, "invalid_state") {
		t.Fatalf("second cancel: exit %d, %q; want %d invalid_state", code, errs, exitRefused)
	}
	if err := runPause(t, c, "resume", "work"); err != "" {
		t.Fatal(err)
	}

	// list: table and JSON.
	var jobs []client.Job
	mustJSON(t, c, &jobs, "list", "-queue", "work")
	if len(jobs) != 2 {
		t.Fatalf("list: %d jobs, want 2", len(jobs))
	}
	mustJSON(t, c, &jobs, "list", "-queue", "work", "-state", "canceled", "-all")
	if len(jobs) != 1 || jobs[0].ID != "fail-1" {
		t.Fatalf("list canceled: %+v", jobs)
	}
	if out, _, code := jobctl(t, c, "list", "-queue", "work"); code != exitOK || !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 3 {
		t.Fatalf("list table: exit %d, %q", code, out)
	}

	// watch: the first events, one JSON object a line, then stop.
	out, _, code = jobctl(t, c, "watch", "-from", "1", "-job", "echo-1", "-n", "3", "-json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 3 || !strings.Contains(lines[0], `"kind":"submitted"`) {
		t.Fatalf("watch: exit %d, %q", code, out)
	}

	// Dependencies: a job after a delayed parent waits, then runs; a bad
	// parent is refused (exit 4); batch shows a batch's progress.
	mustJSON(t, c, &sub, "submit", "-queue", "work", "-kind", "echo", "-id", "dep-p", "-delay", "1s")
	mustJSON(t, c, &sub, "submit", "-queue", "work", "-kind", "echo", "-id", "dep-c", "-after", "dep-p")
	if sub.Job.State != "waiting" {
		t.Fatalf("a job after a delayed parent: %+v", sub.Job)
	}
	waitState(t, c, "dep-c", "succeeded")
	if out, _, code := jobctl(t, c, "dependents", "dep-p"); code != exitOK || out != "dep-c\n" {
		t.Fatalf("dependents: exit %d, %q", code, out)
	}
	if _, errs, code := jobctl(t, c, "submit", "-queue", "work", "-kind", "echo", "-after", "nope"); code != exitRefused || !strings.Contains(errs, "unknown parent") {
		t.Fatalf("submit after an unknown parent: exit %d, %q", code, errs)
	}
	if _, err := cl.CreateBatch(context.Background(), client.BatchCreateRequest{ID: "nightly", Jobs: []client.SubmitRequest{{ID: "bn-1", Queue: "work", Kind: "echo"}},
		Completion: &client.SubmitRequest{ID: "bn-done", Queue: "reports", Kind: "echo"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "bn-1", "succeeded")
	if out, _, code := jobctl(t, c, "batch", "nightly"); code != exitOK || !strings.Contains(out, "nightly: 1 members (succeeded 1); completed") || !strings.Contains(out, "completion job bn-done") {
		t.Fatalf("batch: exit %d, %q", code, out)
	}

	// members, walcompare.
	var mj struct {
		ClusterID string          `json:"cluster_id"`
		Members   []client.Member `json:"members"`
	}
	mustJSON(t, c, &mj, "members")
	ms := mj.Members
	if mj.ClusterID == "" {
		t.Fatalf("members -json: no cluster_id")
	}
	if len(ms) != 3 {
		t.Fatalf("members: %+v", ms)
	}
	leaders := 0
	for _, m := range ms {
		if m.Status == nil || !m.Status.Ready {
			t.Fatalf("member %s: %+v", m.ID, m)
		}
		if m.Status.Role == "Leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("members: %d leaders", leaders)
	}
	if out, _, code := jobctl(t, c, "walcompare"); code != exitOK || !strings.Contains(out, " 0 committed divergences") {
		t.Fatalf("walcompare: exit %d, %q", code, out)
	}

	// backup and verify-backup; a corrupt copy fails the check (exit 8).
	dir := t.TempDir()
	file := filepath.Join(dir, "b.jrb")
	if out, errs, code := jobctl(t, c, "backup", "-o", file); code != exitOK || !strings.Contains(out, "6 jobs") {
		t.Fatalf("backup: exit %d, %q %q", code, out, errs)
	}
	if out, _, code := jobctl(t, nil, "verify-backup", file); code != exitOK || !strings.Contains(out, ": ok:") {
		t.Fatalf("verify-backup: exit %d, %q", code, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)*3/4] ^= 1 // in the job records (the middle fell on the snapshot's version once: "unsupported version")
	bad := filepath.Join(dir, "bad.jrb")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := jobctl(t, nil, "verify-backup", bad); code != exitCheckFailed || !strings.Contains(errs, "corrupt") {
		t.Fatalf("verify-backup of a corrupt file: exit %d, %q", code, errs)
	}

	// Exit statuses: not found, refused (bad input; wrong token), usage,
	// unavailable.
	if _, errs, code := jobctl(t, c, "get", "nope"); code != exitNotFound {
		t.Fatalf("get of a missing job: exit %d, %q", code, errs)
	}
	if _, errs, code := jobctl(t, c, "submit", "-queue", "work", "-kind", "echo", "-id", "a/b"); code != exitRefused {
		t.Fatalf("submit with a bad ID: exit %d, %q", code, errs)
	}
	if _, errs, code := jobctl(t, c, "submit", "-kind", "echo"); code != exitUsage {
		t.Fatalf("submit without -queue: exit %d, %q", code, errs)
	}
	if _, errs, code := jobctl(t, c, "member-add", "n9"); code != exitUsage {
		t.Fatalf("member-add without an address: exit %d, %q", code, errs)
	}
	if out, _, code := jobctl(t, c, "members"); code != exitOK || !strings.Contains(out, "CATCH-UP") || !strings.Contains(out, "caught_up") ||
		!strings.HasPrefix(out, "cluster "+mj.ClusterID+"\n") {
		t.Fatalf("members table without catch-up state: exit %d, %q", code, out)
	}
	if _, _, code := jobctl(t, nil, "frobnicate"); code != exitUsage {
		t.Fatalf("unknown command: exit %d", code)
	}
	if _, errs, code := jobctl(t, nil, "-endpoints", endpoints(c), "-token", "wrong", "stats"); code != exitRefused || !strings.Contains(errs, "401") {
		t.Fatalf("wrong token: exit %d, %q", code, errs)
	}
	if _, errs, code := jobctl(t, nil, "-endpoints", "http://127.0.0.1:1", "-token", "x", "-timeout", "5s", "stats"); code != exitEndpoint || !strings.Contains(errs, "nothing listens there") {
		t.Fatalf("nothing listening at the endpoint: exit %d, %q; want %d saying nothing listens there", code, errs, exitEndpoint)
	}
	firstHour(t, c)
	limitCommands(t, c)
	if _, _, code := jobctl(t, nil, "-h"); code != exitOK {
		t.Fatalf("-h: exit %d", code)
	}
}

// runPause runs jobctl pause or resume and returns "" or what went wrong.
func runPause(t *testing.T, c *cluster.Cluster, cmd, queue string) string {
	t.Helper()
	out, errs, code := jobctl(t, c, cmd, queue)
	if code != exitOK || !strings.Contains(out, "queue "+queue) {
		return fmt.Sprintf("%s: exit %d: %q %q", cmd, code, out, errs)
	}
	return ""
}
