package fsm

import "time"

// QueueLimits is one queue's limits as Jobs.Limits reports them.
type QueueLimits struct {
	Queue string
	// Max is the queue's concurrency limit (0: none), Running its jobs
	// running now.
	Max     uint32
	Running int
	// Kinds are its kinds' concurrency limits, in kind order.
	Kinds []KindLimit
	// Rate is its rate (nil: none).
	Rate *Rate
	// Limited counts the claims a concurrency limit of the queue (its own
	// or a kind's) held back, RateLimited those its rate held back (a
	// claim with room for more that left a ready job of the queue
	// because of it), while the queue had limits: the counts go with its
	// last limit.
	Limited, RateLimited uint64
}

// KindLimit is one kind's concurrency limit in a queue.
type KindLimit struct {
	Kind    string
	Max     uint32
	Running int
}

// Rate is a queue's token bucket: Burst tokens, one more per Every of log
// time, one taken per job leased.
type Rate struct {
	Every time.Duration
	Burst uint32
	// Tokens is the bucket's content at the time Limits was asked for;
	// Full the log time it is full again (zero or past: full).
	Tokens uint32
	Full   time.Time
}

// Limits reports every queue's limits, in queue order. now is a reading
// of the leader's clock (translated into the log's time as LogTime does):
// the time Rate.Tokens is reported at. O(limited queues).
func (m *Jobs) Limits(now time.Time) []QueueLimits {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.st.clock.at(toNanos(now))
	var out []QueueLimits
	m.st.limits.Scan(func(l *qlimit) bool {
		ql := QueueLimits{Queue: l.queue, Max: l.max, Limited: l.limited, RateLimited: l.rateLimited}
		if q, ok := m.st.queues.Get(&queue{name: l.queue}); ok {
			ql.Running = q.counts[StateRunning]
		}
		for _, k := range l.kinds {
			ql.Kinds = append(ql.Kinds, KindLimit{Kind: k.kind, Max: k.max, Running: k.running})
		}
		if l.every > 0 {
			ql.Rate = &Rate{Every: time.Duration(l.every), Burst: l.burst, Tokens: l.tokens(t), Full: fromNanos(l.full)}
		}
		out = append(out, ql)
		return true
	})
	return out
}

// QueueLimit returns one queue's limits, false if it has none.
func (m *Jobs) QueueLimit(queue string, now time.Time) (QueueLimits, bool) {
	for _, ql := range m.Limits(now) {
		if ql.Queue == queue {
			return ql, true
		}
	}
	return QueueLimits{}, false
}
