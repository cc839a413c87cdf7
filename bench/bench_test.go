package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// A short run at C=64 (part of `make test`, so the comparison never rots):
// every system starts, every series completes operations, and the table
// holds every series' row and every goal's verdict.
func TestShortRun(t *testing.T) {
	rows, err := run(config{Clients: []int{64}, Duration: 700 * time.Millisecond, Warm: 200 * time.Millisecond, Runs: 1, Payload: 256},
		func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].C != 64 {
		t.Fatalf("rows %+v", rows)
	}
	for s, r := range rows[0].R {
		if r.Ops == 0 || r.Rate <= 0 || r.P99 < r.P50 || r.CPU <= 0 {
			t.Errorf("%s: %+v", allSeries[s].Name, r)
		}
	}
	tab := table(rows)
	t.Log("\n" + tab)
	for s := range allSeries {
		if !strings.Contains(tab, "| "+allSeries[s].Name+" | ") {
			t.Errorf("no row for %s", allSeries[s].Name)
		}
	}
	if got := strings.Count(tab, " met |") + strings.Count(tab, " **missed** |"); got != len(goals) {
		t.Errorf("%d goal verdicts, want %d:\n%s", got, len(goals), tab)
	}
}

// -systems and -series select series; unknown names are refused.
func TestSelectSeries(t *testing.T) {
	got, err := selectSeries("jobraft,nats", "jobraft-submit,nats-cycle,bare-submit")
	if err != nil || !slices.Equal(got, []string{"nats-cycle", "jobraft-submit"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := selectSeries("jobraft5", ""); err != nil || !slices.Equal(got, []string{"jobraft5-submit", "jobraft5-cycle"}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range [][2]string{{"mysql", ""}, {"jobraft", "jobraft-nope"}, {"bare", "jobraft-submit"}} {
		if _, err := selectSeries(bad[0], bad[1]); err == nil {
			t.Errorf("%q %q accepted", bad[0], bad[1])
		}
	}
}

// The bare baseline's queue state machine: submits queue in order, a claim
// takes the oldest (nothing when empty), an ack removes it, a repeated
// submit of an ID is ignored.
func TestQueueFSM(t *testing.T) {
	f := newQueueFSM()
	apply := func(op byte, id string) string {
		out, _ := f.Apply(&hraft.Log{Data: encodeOp(op, id, []byte("p"))}).([]byte)
		return string(out)
	}
	apply(opSubmit, "a")
	apply(opSubmit, "b")
	apply(opSubmit, "a")
	if got := apply(opClaim, ""); got != "a" {
		t.Fatalf("first claim %q", got)
	}
	apply(opAck, "a")
	if got := apply(opClaim, ""); got != "b" {
		t.Fatalf("second claim %q", got)
	}
	if got := apply(opClaim, ""); got != "" {
		t.Fatalf("claim of an empty queue %q", got)
	}
	if len(f.jobs) != 1 || !f.claimed["b"] {
		t.Fatalf("jobs %v claimed %v", f.jobs, f.claimed)
	}
}
