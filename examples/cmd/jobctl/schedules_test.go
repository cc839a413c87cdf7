package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// TestJobctlSchedules runs the schedule commands against a live 3-member
// jobd cluster: a create, its repeat and a clash (exit 4, schedule_exists),
// bad input (exit 4 with its kind, or a usage error), the schedule firing
// into its queue, list, get, pause, resume and delete (then exit 3).
func TestJobctlSchedules(t *testing.T) {
	binaries(t)
	c, _ := startCluster(t, t.TempDir(), []string{"-queues", "work=1"}, nil)
	create := []string{"schedule-create", "-id", "nightly", "-every", "1s", "-queue", "sq", "-kind", "report", "-payload", "p"}
	out, errs, code := jobctl(t, c, create...)
	if code != exitOK || !strings.Contains(out, "schedule nightly created (next tick ") {
		t.Fatalf("create: exit %d, %q %q", code, out, errs)
	}
	if out, _, code = jobctl(t, c, create...); code != exitOK || !strings.Contains(out, "existed already with this definition") {
		t.Fatalf("repeated create: exit %d, %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schedule-create", "-id", "nightly", "-every", "2s", "-queue", "sq", "-kind", "report"}, exitRefused, "schedule_exists"},
		{[]string{"schedule-create", "-id", "x", "-cron", "99 * * * *", "-queue", "sq", "-kind", "k"}, exitRefused, "bad_cron"},
		{[]string{"schedule-create", "-id", "x", "-every", "1ms", "-queue", "sq", "-kind", "k"}, exitRefused, "bad_interval"},
		{[]string{"schedule-create", "-id", "x", "-cron", "0 9 * * *", "-zone", "Nowhere/Land", "-queue", "sq", "-kind", "k"}, exitRefused, "unknown_zone"},
		{[]string{"schedule-create", "-id", "x", "-queue", "sq", "-kind", "k"}, exitUsage, "give -cron or -every"},
		{[]string{"schedule-create", "-every", "1m"}, exitUsage, "missing -id and -queue and -kind"},
		{[]string{"schedule-get", "nope"}, exitNotFound, "schedule_not_found"},
	} {
		if _, errs, code := jobctl(t, c, tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d %s", tc.args, code, errs, tc.code, tc.want)
		}
	}

	var s client.Schedule
	deadline := time.Now().Add(20 * time.Second)
	for s.Fired < 2 && time.Now().Before(deadline) {
		mustJSON(t, c, &s, "schedule-get", "nightly")
	}
	if s.Fired < 2 || s.Next == nil || s.Overlap != "allow" || s.CatchUp != "one" {
		t.Fatalf("schedule after 20s: %+v", s)
	}
	var jobs []client.Job
	mustJSON(t, c, &jobs, "list", "-queue", "sq")
	if len(jobs) < 2 || !strings.HasPrefix(jobs[0].ID, "@nightly:") {
		t.Fatalf("fired jobs: %+v", jobs)
	}
	if out, _, code = jobctl(t, c, "schedule-list"); code != exitOK || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "nightly  every 1s") {
		t.Fatalf("schedule-list: exit %d, %q", code, out)
	}
	mustJSON(t, c, &s, "schedule-pause", "nightly")
	if !s.Paused {
		t.Fatalf("pause: %+v", s)
	}
	if out, _, code = jobctl(t, c, "schedule-resume", "nightly"); code != exitOK || !strings.Contains(out, "paused     false") {
		t.Fatalf("resume: exit %d, %q", code, out)
	}
	if out, _, code = jobctl(t, c, "schedule-delete", "nightly"); code != exitOK || out != "schedule nightly deleted\n" {
		t.Fatalf("delete: exit %d, %q", code, out)
	}
	if _, errs, code := jobctl(t, c, "schedule-delete", "nightly"); code != exitNotFound || !strings.Contains(errs, "schedule_not_found") {
		t.Fatalf("second delete: exit %d, %q", code, errs)
	}
}
