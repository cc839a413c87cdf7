package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobraft/jobraft"
)

// eventFeed follows this member's committed job events (Controller.Watch)
// from the console's start: per-queue event rates over the last minute,
// and each job's recent events for its page. Both are bounded and are
// only what this jobd process saw since it started (the pages say so).
type eventFeed struct {
	mu     sync.Mutex
	since  time.Time
	start  uint64                      // first index followed (0 until the watch started)
	rings  map[string]*[rateSlots]slot // per queue: one slot per second, a ring
	jobs   map[string][]feedEvent      // recent events per job
	order  []string                    // jobs in first-seen order, for eviction
	events uint64
}

const (
	rateSlots      = 60    // seconds of history for rates
	feedMaxJobs    = 10000 // jobs whose events are kept
	feedMaxPerJob  = 32    // events kept per job (the latest)
	feedRetryPause = time.Second
)

type slot struct {
	sec    int64 // unix second this slot counts
	counts map[jobraft.EventKind]int
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

func (f *eventFeed) add(ev jobraft.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.start == 0 {
		f.start = ev.Index
	}
	f.events++
	if ev.Queue != "" {
		ring := f.rings[ev.Queue]
		if ring == nil {
			ring = new([rateSlots]slot)
			f.rings[ev.Queue] = ring
		}
		sec := time.Now().Unix()
		s := &ring[sec%rateSlots]
		if s.sec != sec {
			*s = slot{sec: sec, counts: map[jobraft.EventKind]int{}}
		}
		s.counts[ev.Kind]++
	}
	if ev.JobID == "" {
		return
	}
	fe := feedEvent{Index: ev.Index, Time: ev.Time, Kind: string(ev.Kind), Attempt: ev.Attempt, Token: ev.Token, Worker: ev.Worker}
	if ev.State.Valid() {
		fe.State = ev.State.String()
	}
	list, seen := f.jobs[ev.JobID]
	if !seen {
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

// queueRates are one queue's events per second over the last minute (or
// since the feed started, if that is shorter).
type queueRates struct {
	Submitted, Claimed, Acked, Failed, Canceled float64
}

func (f *eventFeed) rates(queue string) queueRates {
	f.mu.Lock()
	defer f.mu.Unlock()
	ring := f.rings[queue]
	if ring == nil {
		return queueRates{}
	}
	now := time.Now()
	window := min(time.Duration(rateSlots)*time.Second, now.Sub(f.since))
	secs := max(window.Seconds(), 1)
	var r queueRates
	for _, s := range ring {
		if s.counts == nil || now.Unix()-s.sec >= rateSlots {
			continue
		}
		r.Submitted += float64(s.counts[jobraft.EventSubmitted])
		r.Claimed += float64(s.counts[jobraft.EventClaimed])
		r.Acked += float64(s.counts[jobraft.EventAcked])
		r.Failed += float64(s.counts[jobraft.EventNaked] + s.counts[jobraft.EventTermed] + s.counts[jobraft.EventExpired])
		r.Canceled += float64(s.counts[jobraft.EventCanceled])
	}
	r.Submitted /= secs
	r.Claimed /= secs
	r.Acked /= secs
	r.Failed /= secs
	r.Canceled /= secs
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
