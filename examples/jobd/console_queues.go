package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
)

// queueRow is one queue on the queues page (and in the live stream): its
// counts by state, the event rates and claim latency of the last minute,
// how long its oldest waiting job has waited, and the kinds no worker
// seems to serve (GET /v1/stats's "unserved", unserved.go).
type queueRow struct {
	Name   string     `json:"name"`
	Paused bool       `json:"paused"`
	Counts []int      `json:"counts"` // by consoleStates
	Total  int        `json:"total"`
	Rates  queueRates `json:"-"`
	// Display strings (the page and the live stream show the same).
	Submitted string `json:"submitted"`
	Claimed   string `json:"claimed"`
	Acked     string `json:"acked"`
	Failed    string `json:"failed"`
	Latency   string `json:"latency"` // claim wait p50 / max over the last minute
	Oldest    string `json:"oldest"`  // the oldest waiting job's wait
	Hint      string `json:"hint"`    // "" or why no worker seems to serve it
}

const (
	// waitScanMax bounds the waiting jobs read per queue for the oldest
	// wait and the hint (a queue with more says "at least").
	waitScanMax = 1000
)

// queueRows builds the rows from this member's applied state.
func (c *console) queueRows(ctx context.Context) ([]queueRow, jobraft.Stats) {
	st := c.s.ctl.LocalStats()
	rows := make([]queueRow, 0, len(st.Queues))
	now := time.Now()
	hints := map[string][]string{}
	for _, u := range c.s.served.observe(st.Queues, now) { // unserved.go: the same as GET /v1/stats says
		hints[u.Queue] = append(hints[u.Queue], "kind "+u.Kind+": "+u.Hint)
	}
	for _, q := range st.Queues {
		r := c.feed.rates(q.Name)
		row := queueRow{Name: q.Name, Paused: q.Paused, Rates: r, Submitted: rate(r.Submitted), Claimed: rate(r.Claimed),
			Acked: rate(r.Acked), Failed: rate(r.Failed), Latency: "—", Oldest: "—"}
		for s := jobraft.StatePending; s.Valid(); s++ {
			n := q.Counts.Of(s)
			row.Counts = append(row.Counts, n)
			row.Total += n
		}
		if r.Samples > 0 {
			row.Latency = fmt.Sprintf("%s / %s", short(r.WaitP50), short(r.WaitMax))
		}
		w := c.waiting(ctx, q, now)
		if !w.oldest.IsZero() {
			row.Oldest = short(now.Sub(w.oldest))
			if w.partial {
				row.Oldest = "≥ " + row.Oldest
			}
		}
		row.Hint = strings.Join(hints[q.Name], "; ")
		rows = append(rows, row)
	}
	return rows, st
}

// waitingJobs is what waits in a queue: since when its oldest waiting job
// is ready (pending, or scheduled and due).
type waitingJobs struct {
	oldest  time.Time
	partial bool // more waited than were read (waitScanMax)
}

// waiting reads a queue's pending jobs and its due scheduled ones (at most
// waitScanMax of each). A pending job is ready since its last change (it
// became pending then) or its run-at, whichever is later; a scheduled one
// since its run-at.
func (c *console) waiting(ctx context.Context, q fsm.QueueInfo, now time.Time) waitingJobs {
	var w waitingJobs
	note := func(ready time.Time) {
		if w.oldest.IsZero() || ready.Before(w.oldest) {
			w.oldest = ready
		}
	}
	if n := q.Counts.Pending; n > 0 {
		pg, err := c.s.ctl.List(ctx, jobraft.ListFilter{Queue: q.Name, State: jobraft.StatePending, Consistency: jobraft.Local},
			jobraft.Page{Limit: min(n, waitScanMax)})
		if err == nil {
			for _, j := range pg.Jobs {
				ready := j.Updated
				if j.RunAt.After(ready) {
					ready = j.RunAt
				}
				note(ready)
			}
			w.partial = pg.Next != ""
		}
	}
	if q.Counts.Scheduled > 0 {
		pg, err := c.s.ctl.List(ctx, jobraft.ListFilter{Queue: q.Name, State: jobraft.StateScheduled, Consistency: jobraft.Local},
			jobraft.Page{Limit: min(q.Counts.Scheduled, waitScanMax)})
		if err == nil {
			for _, j := range pg.Jobs { // by run-at: the due ones first
				if j.RunAt.After(now) {
					break
				}
				note(j.RunAt)
			}
			if pg.Next != "" && len(pg.Jobs) > 0 && !pg.Jobs[len(pg.Jobs)-1].RunAt.After(now) {
				w.partial = true
			}
		}
	}
	return w
}

// GET /console/queues: the queue rows and the charts (both kept current
// by the live stream).
func (c *console) queuesPage(w http.ResponseWriter, r *http.Request, p *page) error {
	rows, st := c.queueRows(r.Context())
	since, _ := c.feed.started()
	p.Title, p.Nav, p.Live = "Queues", "queues", "queues"
	p.Data = map[string]any{"Queues": rows, "States": consoleStates, "Applied": st.AppliedIndex, "Since": since, "Limits": limitsOf(st.Limits)}
	c.render(w, http.StatusOK, "queues", p)
	return nil
}

// short renders a duration for a table cell: milliseconds below a
// second, else rounded to a tenth of a second (or a second past a minute).
func short(d time.Duration) string {
	switch {
	case d < 0:
		return "—"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func rate(f float64) string { return fmt.Sprintf("%.2f", f) }
