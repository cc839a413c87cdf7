package main

import (
	hraft "github.com/hashicorp/raft"
	"strings"
	"testing"
	"time"
)

// A short run at C=64 (part of `make test`, so the comparison never rots):
// every system starts, every series completes operations, and the table
// holds the row and its ratios.
func TestShortRun(t *testing.T) {
	rows, err := run(config{Clients: []int{64}, Duration: time.Second, Warm: 300 * time.Millisecond, Runs: 1, Payload: 256},
		func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].C != 64 {
		t.Fatalf("rows %+v", rows)
	}
	for s, r := range rows[0].R {
		if r.Ops == 0 || r.Rate <= 0 || r.P99 < r.P50 || r.CPU <= 0 {
			t.Errorf("%s: %+v", seriesNames[s], r)
		}
	}
	tab := table(rows)
	t.Log("\n" + tab)
	if !strings.Contains(tab, "| 64 | ") || strings.Count(tab, "×") != 7 {
		t.Errorf("table without the C=64 row or its seven ratios (five of rate, two of CPU):\n%s", tab)
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
