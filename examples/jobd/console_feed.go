package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobraft/jobraft"
)

// eventFeed follows this member's committed job events (Controller.Watch)
// from the console's start: per-queue event rates and latencies over the
// last minute, the charts' per-second series, each job's recent events for
// its page, and the live pages' subscriptions (console_live.go). All of it
// is bounded and is only what this jobd process saw since it started (the
// pages say so).
type eventFeed struct {
	mu     sync.Mutex
	since  time.Time
	start  uint64                      // first index followed (0 until the watch started)
	rings  map[string]*[rateSlots]slot // per queue: one slot per second, a ring
	all    [rateSlots]slot             // every queue together (the charts)
	lag    [rateSlots]lagSample        // sampled once a second (sampleLag)
	jobs   map[string][]feedEvent      // recent events per job
	order  []string                    // jobs in first-seen order, for eviction
	events uint64
	// runAt looks a job's run-at time up (when a claimed job that was
	// scheduled became due); nil or false: unknown.
	runAt func(id string) (time.Time, bool)
}

const (
	rateSlots      = 60    // seconds of history for rates and charts
	slotSamples    = 128   // latency samples kept per second (the first ones)
	feedMaxJobs    = 10000 // jobs whose events are kept
	feedMaxPerJob  = 32    // events kept per job (the latest)
	feedRetryPause = time.Second
)

type slot struct {
	sec    int64 // unix second this slot counts
	counts map[jobraft.EventKind]int
	waits  []time.Duration // ready (pending or due) → claimed
	runs   []time.Duration // claimed → acked
}

// lagSample is this member's replication lag at one second.
type lagSample struct {
	sec      int64
	apply    int64 // commit index minus applied index here
	follower int64 // the slowest member's entries behind this leader; -1: not the leader
}

// feedEvent is one event as a job's page shows it.
type feedEvent struct {
	Index   uint64
	Time    time.Time
	Kind    string
	State   string
	Attempt uint32
	Token   uint64
	Worker  string
}

func newEventFeed() *eventFeed {
	return &eventFeed{since: time.Now(), rings: map[string]*[rateSlots]slot{}, jobs: map[string][]feedEvent{}}
}

// run follows the events until the controller closes.
func (f *eventFeed) run(ctl *jobraft.Controller) {
	stop := make(chan struct{})
	defer close(stop)
	go f.sampleLags(ctl, stop)
	var from uint64
	for {
		evs, err := ctl.Watch(context.Background(), from, jobraft.WatchFilter{})
		var ce *jobraft.CompactedError
		switch {
		case errors.As(err, &ce):
			from = ce.Oldest
			continue
		case errors.Is(err, jobraft.ErrClosed):
			return
		case err != nil:
			time.Sleep(feedRetryPause) // a pause between attempts, not a wait for state
			continue
		}
		for ev := range evs {
			if ev.Kind == jobraft.EventError {
				if errors.Is(ev.Err, jobraft.ErrClosed) {
					return
				}
				if errors.As(ev.Err, &ce) {
					from = ce.Oldest
				}
				break
			}
			f.add(ev)
			from = ev.Index + 1
		}
	}
}

// current returns the ring's slot for sec, reset if it held an older second.
func current(ring *[rateSlots]slot, sec int64) *slot {
	s := &ring[sec%rateSlots]
	if s.sec != sec {
		*s = slot{sec: sec, counts: map[jobraft.EventKind]int{}}
	}
	return s
}

func (s *slot) sample(wait, run time.Duration, hasWait, hasRun bool) {
	if hasWait && len(s.waits) < slotSamples {
		s.waits = append(s.waits, wait)
	}
	if hasRun && len(s.runs) < slotSamples {
		s.runs = append(s.runs, run)
	}
}

func (f *eventFeed) add(ev jobraft.Event) {
	var runAt time.Time
	if ev.Kind == jobraft.EventClaimed && f.runAt != nil {
		runAt, _ = f.runAt(ev.JobID) // before the lock: it reads the state machine
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.start == 0 {
		f.start = ev.Index
	}
	f.events++
	list := f.jobs[ev.JobID]
	wait, hasWait := claimWait(ev, list, runAt)
	run, hasRun := runTime(ev, list)
	if ev.Queue != "" {
		ring := f.rings[ev.Queue]
		if ring == nil {
			ring = new([rateSlots]slot)
			f.rings[ev.Queue] = ring
		}
		sec := time.Now().Unix()
		for _, s := range []*slot{current(ring, sec), current(&f.all, sec)} {
			s.counts[ev.Kind]++
			s.sample(wait, run, hasWait, hasRun)
		}
	}
	if ev.JobID == "" {
		return
	}
	fe := feedEvent{Index: ev.Index, Time: ev.Time, Kind: string(ev.Kind), Attempt: ev.Attempt, Token: ev.Token, Worker: ev.Worker}
	if ev.State.Valid() {
		fe.State = ev.State.String()
	}
	if _, seen := f.jobs[ev.JobID]; !seen {
		if len(f.order) >= feedMaxJobs {
			delete(f.jobs, f.order[0])
			f.order = f.order[1:]
		}
		f.order = append(f.order, ev.JobID)
	}
	list = append(list, fe)
	if len(list) > feedMaxPerJob {
		list = list[len(list)-feedMaxPerJob:]
	}
	f.jobs[ev.JobID] = list
}

// claimWait is how long a claimed job waited to be claimed: from the last
// event that left it pending (submitted, retried, naked or expired without
// a backoff) or from its run-at (it was scheduled), whichever is later.
// Both are log times. Unknown (false) when the feed saw neither.
func claimWait(ev jobraft.Event, seen []feedEvent, runAt time.Time) (time.Duration, bool) {
	if ev.Kind != jobraft.EventClaimed {
		return 0, false
	}
	ready := runAt
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].Kind == string(jobraft.EventClaimed) {
			break // an earlier attempt: what follows it is this attempt's
		}
		if seen[i].State == jobraft.StatePending.String() && seen[i].Time.After(ready) {
			ready = seen[i].Time
			break
		}
	}
	if ready.IsZero() || ev.Time.Before(ready) {
		return 0, false
	}
	return ev.Time.Sub(ready), true
}

// runTime is how long an acked job ran: from its last claim the feed saw.
func runTime(ev jobraft.Event, seen []feedEvent) (time.Duration, bool) {
	if ev.Kind != jobraft.EventAcked {
		return 0, false
	}
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].Kind == string(jobraft.EventClaimed) {
			if ev.Time.Before(seen[i].Time) {
				return 0, false
			}
			return ev.Time.Sub(seen[i].Time), true
		}
	}
	return 0, false
}

// sampleLags samples this member's replication lag once a second until
// stop: its commit index minus its applied index, and, while it leads, the
// slowest member's lag by the leader's catch-up monitor.
func (f *eventFeed) sampleLags(ctl *jobraft.Controller, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			st := ctl.Node().Status()
			follower := int64(-1)
			if st.Progress != nil {
				follower = 0
				for _, p := range st.Progress {
					if p.ID != st.ID {
						follower = max(follower, int64(p.Lag))
					}
				}
			}
			f.sampleLag(now, int64(st.CommitIndex)-int64(min(st.AppliedIndex, st.CommitIndex)), follower)
		}
	}
}

// sampleLag records one second's replication lag.
func (f *eventFeed) sampleLag(now time.Time, apply, follower int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sec := now.Unix()
	f.lag[sec%rateSlots] = lagSample{sec: sec, apply: apply, follower: follower}
}

// queueRates are one queue's events per second over the last minute (or
// since the feed started, if that is shorter), and its claim waits and run
// times over the same window.
type queueRates struct {
	Submitted, Claimed, Acked, Failed, Canceled float64
	// WaitP50 and WaitMax: how long claimed jobs had waited (ready →
	// claimed); RunP50: how long acked jobs ran. -1: no sample.
	WaitP50, WaitMax, RunP50 time.Duration
	Samples                  int // claim waits the figures are over
}

func (f *eventFeed) rates(queue string) queueRates {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := queueRates{WaitP50: -1, WaitMax: -1, RunP50: -1}
	ring := f.rings[queue]
	if ring == nil {
		return r
	}
	now := time.Now()
	window := min(time.Duration(rateSlots)*time.Second, now.Sub(f.since))
	secs := max(window.Seconds(), 1)
	var waits, runs []time.Duration
	for _, s := range ring {
		if s.counts == nil || now.Unix()-s.sec >= rateSlots {
			continue
		}
		r.Submitted += float64(s.counts[jobraft.EventSubmitted])
		r.Claimed += float64(s.counts[jobraft.EventClaimed])
		r.Acked += float64(s.counts[jobraft.EventAcked])
		r.Failed += float64(s.counts[jobraft.EventNaked] + s.counts[jobraft.EventTermed] + s.counts[jobraft.EventExpired])
		r.Canceled += float64(s.counts[jobraft.EventCanceled])
		waits = append(waits, s.waits...)
		runs = append(runs, s.runs...)
	}
	r.Submitted /= secs
	r.Claimed /= secs
	r.Acked /= secs
	r.Failed /= secs
	r.Canceled /= secs
	r.WaitP50, r.WaitMax, r.Samples = quantile(waits, 0.5), quantile(waits, 1), len(waits)
	r.RunP50 = quantile(runs, 0.5)
	return r
}

// jobEvents returns a copy of the events seen for id, oldest first.
func (f *eventFeed) jobEvents(id string) []feedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]feedEvent(nil), f.jobs[id]...)
}

// started says since when and from which index the feed follows events.
func (f *eventFeed) started() (time.Time, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.since, f.start
}
