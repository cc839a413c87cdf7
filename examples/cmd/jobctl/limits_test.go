package main

import (
	"strings"
	"testing"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// limitCommands drives the limit commands and submit's unique flags
// against TestJobctlCommands' cluster (queue "lim", which no worker
// serves): a limit of 0 and a rate of 0 are refused (exit 4), a limit
// holds, limits shows it with the claim it held back, a unique resubmit
// answers the existing job.
func limitCommands(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if _, errs, code := jobctl(t, c, "limit", "lim", "0"); code != exitRefused || !strings.Contains(errs, "limit of 0") {
		t.Fatalf("limit 0: exit %d, %q; want %d", code, errs, exitRefused)
	}
	if _, errs, code := jobctl(t, c, "rate", "lim", "0"); code != exitRefused || !strings.Contains(errs, "must be above 0") {
		t.Fatalf("rate 0: exit %d, %q; want %d", code, errs, exitRefused)
	}
	if _, errs, code := jobctl(t, c, "submit", "-queue", "lim", "-kind", "k", "-unique", "-unique-states", "pending,nope"); code != exitRefused {
		t.Fatalf("unknown unique state: exit %d, %q; want %d", code, errs, exitRefused)
	}
	if out, _, code := jobctl(t, c, "limit", "lim", "1"); code != exitOK || !strings.Contains(out, "queue lim: 0 of 1 running") {
		t.Fatalf("limit: exit %d, %q", code, out)
	}
	var sub client.Submitted
	mustJSON(t, c, &sub, "submit", "-queue", "lim", "-kind", "k", "-payload", "u", "-unique", "-unique-period", "1h")
	first := sub.Job.ID
	if out, _, code := jobctl(t, c, "submit", "-queue", "lim", "-kind", "k", "-payload", "u", "-unique", "-unique-period", "1h"); code != exitOK || !strings.Contains(out, first+" existed already") {
		t.Fatalf("unique resubmit: exit %d, %q (first %s)", code, out, first)
	}
	mustJSON(t, c, &sub, "submit", "-queue", "lim", "-kind", "k", "-payload", "other")
	var claimed []client.Claimed
	mustJSON(t, c, &claimed, "claim", "-queue", "lim", "-max", "2")
	if len(claimed) != 1 {
		t.Fatalf("claimed %d under a limit of 1", len(claimed))
	}
	var lr client.LimitsReply
	mustJSON(t, c, &lr, "limits")
	if len(lr.Limits) != 1 || lr.Limits[0].Running != 1 || lr.Limits[0].Limited != 1 {
		t.Fatalf("limits: %+v", lr)
	}
	if out, _, code := jobctl(t, c, "limits"); code != exitOK || !strings.Contains(out, "1 of 1 running") {
		t.Fatalf("limits table: exit %d, %q", code, out)
	}
	if out, _, code := jobctl(t, c, "limit-clear", "lim"); code != exitOK || !strings.Contains(out, "no limits") {
		t.Fatalf("limit-clear: exit %d, %q", code, out)
	}
}
