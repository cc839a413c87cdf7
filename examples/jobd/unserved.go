package main

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// Unserved kinds: a job of a kind no worker handles stays pending for
// ever, and nothing else says so. jobd tells it from what this member
// observes: a (queue, kind) is unserved when its jobs have waited
// (pending, or scheduled and due) for at least -unserved-after while no
// job of that queue and kind was claimed, in a queue that is not paused.
// Claims are seen as this member applies them (claimed events: every
// member applies every claim), waiting jobs by sampling this member's
// state, so the observation starts when the member does, and the clock of
// a pair restarts at each of its claims. It cannot tell "no worker handles
// the kind" from "every worker that does is busy for that long": the hint
// says both. Exported in GET /v1/stats ("unserved") and as the gauge
// jobd_pending_unserved_jobs{queue,kind}.

// pairKey names a (queue, kind).
type pairKey struct{ queue, kind string }

// servedKinds is the observation.
type servedKinds struct {
	after time.Duration
	mu    sync.Mutex
	// since: when this member first saw jobs of the pair waiting, or
	// saw its last claim since, whichever is later.
	since map[pairKey]time.Time
}

func newServedKinds(after time.Duration) *servedKinds {
	return &servedKinds{after: after, since: map[pairKey]time.Time{}}
}

// claimed notes a claim of a job of queue and kind at now.
func (s *servedKinds) claimed(queue, kind string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.since[pairKey{queue, kind}]; ok {
		s.since[pairKey{queue, kind}] = now
	}
}

// restart restarts every pair's clock: claims may have been missed (the
// claim watch fell behind and was compacted).
func (s *servedKinds) restart(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.since {
		s.since[k] = now
	}
}

// observe takes queues (this member's state at now) and returns the
// unserved pairs, by queue then kind (none from a nil s).
func (s *servedKinds) observe(queues []fsm.QueueInfo, now time.Time) []client.Unserved {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[pairKey]bool{}
	var out []client.Unserved
	for _, q := range queues {
		if q.Paused {
			continue // nothing is claimed from a paused queue: not a worker's absence
		}
		for _, k := range q.Kinds {
			due := k.Scheduled > 0 && !k.NextRunAt.After(now)
			if k.Pending == 0 && !due {
				continue
			}
			key := pairKey{q.Name, k.Kind}
			seen[key] = true
			since, ok := s.since[key]
			if !ok {
				since = now
				s.since[key] = now
			}
			if waited := now.Sub(since); waited >= s.after {
				out = append(out, client.Unserved{Queue: q.Name, Kind: k.Kind, Pending: k.Pending, DueScheduled: due,
					Since: since, Hint: "no job of this kind was claimed from this queue for " + waited.Round(time.Second).String() +
						" while jobs waited: no worker serves this kind (or every one that does is busy)"})
			}
		}
	}
	for k := range s.since {
		if !seen[k] {
			delete(s.since, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// sampleServed samples this member's state into s every interval, so a
// pair's wait counts from when its jobs began to wait, not from the first
// stats request.
func sampleServed(ctx context.Context, ctl *jobraft.Controller, s *servedKinds, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.observe(ctl.LocalStats().Queues, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchClaims feeds s the claims this member applies, resuming after
// compaction (the pairs' clocks restart then: claims may have been missed).
func watchClaims(ctx context.Context, ctl *jobraft.Controller, s *servedKinds) {
	var from uint64
	for ctx.Err() == nil {
		evs, err := ctl.Watch(ctx, from, jobraft.WatchFilter{Kinds: []jobraft.EventKind{jobraft.EventClaimed}})
		var ce *jobraft.CompactedError
		if errors.As(err, &ce) {
			from = ce.Oldest
			s.restart(time.Now())
			continue
		}
		if err != nil {
			return
		}
		for ev := range evs {
			switch {
			case ev.Kind == jobraft.EventClaimed:
				s.claimed(ev.Queue, ev.JobKind, time.Now())
				from = ev.Index + 1
			case errors.As(ev.Err, &ce):
				from = ce.Oldest
				s.restart(time.Now())
			}
		}
	}
}
