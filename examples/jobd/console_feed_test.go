package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
)

// The feed keeps the latest feedMaxPerJob events of at most feedMaxJobs
// jobs (the first seen go first) and counts rates per queue.
func TestEventFeedBounds(t *testing.T) {
	f := newEventFeed()
	f.since = time.Now().Add(-time.Hour) // rates over the full minute
	for i := range feedMaxPerJob + 5 {
		f.add(jobraft.Event{Index: uint64(i + 1), Kind: jobraft.EventClaimed, JobID: "a", Queue: "q", State: jobraft.StateRunning})
	}
	evs := f.jobEvents("a")
	if len(evs) != feedMaxPerJob || evs[0].Index != 6 || evs[len(evs)-1].Index != feedMaxPerJob+5 || evs[0].State != "running" {
		t.Fatalf("job a: %d events, first %+v", len(evs), evs[0])
	}
	for i := range feedMaxJobs {
		f.add(jobraft.Event{Index: uint64(1000 + i), Kind: jobraft.EventSubmitted, JobID: fmt.Sprintf("j%d", i), Queue: "q"})
	}
	if len(f.jobEvents("a")) != 0 || len(f.jobs) != feedMaxJobs || len(f.jobEvents("j0")) != 1 {
		t.Fatalf("eviction: a has %d events, %d jobs kept", len(f.jobEvents("a")), len(f.jobs))
	}
	r := f.rates("q")
	if want := float64(feedMaxJobs) / rateSlots; r.Submitted != want || r.Claimed != float64(feedMaxPerJob+5)/rateSlots {
		t.Fatalf("rates %+v, want submitted %g/s", r, want)
	}
	if r := f.rates("other"); r != (queueRates{WaitP50: -1, WaitMax: -1, RunP50: -1}) {
		t.Fatalf("unknown queue: %+v", r)
	}
}
