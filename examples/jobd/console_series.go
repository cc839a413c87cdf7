package main

import (
	"slices"
	"time"

	"github.com/jobraft/jobraft"
)

// chartSeries is what the queues page's charts draw: one point a second
// over the last minute, oldest first, ending at End (a unix second). A
// negative point is a second without a sample (or before the feed
// started): the chart leaves a gap.
type chartSeries struct {
	End       int64     `json:"end"`
	Submitted []int     `json:"submitted"` // jobs per second, every queue
	Acked     []int     `json:"acked"`
	Failed    []int     `json:"failed"`   // naked, termed or expired
	WaitP50   []float64 `json:"wait_p50"` // ms a claimed job had waited (ready → claimed)
	WaitMax   []float64 `json:"wait_max"`
	RunP50    []float64 `json:"run_p50"`   // ms an acked job ran (claimed → acked)
	ApplyLag  []int64   `json:"apply_lag"` // entries committed but not applied here
	// FollowerLag is the slowest member's entries behind this member's
	// log while it leads; -1 while it does not.
	FollowerLag []int64 `json:"follower_lag"`
}

// series returns the charts' points for the minute ending at now.
func (f *eventFeed) series(now time.Time) chartSeries {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := now.Unix()
	out := chartSeries{End: end}
	started := f.since.Unix()
	for sec := end - rateSlots + 1; sec <= end; sec++ {
		s := f.all[sec%rateSlots]
		l := f.lag[sec%rateSlots]
		switch {
		case sec < started:
			out.Submitted, out.Acked, out.Failed = append(out.Submitted, -1), append(out.Acked, -1), append(out.Failed, -1)
		case s.sec != sec:
			out.Submitted, out.Acked, out.Failed = append(out.Submitted, 0), append(out.Acked, 0), append(out.Failed, 0)
		default:
			out.Submitted = append(out.Submitted, s.counts[jobraft.EventSubmitted])
			out.Acked = append(out.Acked, s.counts[jobraft.EventAcked])
			out.Failed = append(out.Failed, s.counts[jobraft.EventNaked]+s.counts[jobraft.EventTermed]+s.counts[jobraft.EventExpired])
		}
		var waits, runs []time.Duration
		if s.sec == sec {
			waits, runs = s.waits, s.runs
		}
		out.WaitP50 = append(out.WaitP50, ms(quantile(waits, 0.5)))
		out.WaitMax = append(out.WaitMax, ms(quantile(waits, 1)))
		out.RunP50 = append(out.RunP50, ms(quantile(runs, 0.5)))
		if l.sec == sec {
			out.ApplyLag, out.FollowerLag = append(out.ApplyLag, l.apply), append(out.FollowerLag, l.follower)
		} else {
			out.ApplyLag, out.FollowerLag = append(out.ApplyLag, -1), append(out.FollowerLag, -1)
		}
	}
	return out
}

// quantile returns the q-quantile (nearest rank) of ds; -1 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(i, len(s)-1)]
}

// ms is d in milliseconds; -1 stays -1 (no sample).
func ms(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}
