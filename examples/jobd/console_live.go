package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jobraft/jobraft"
)

// GET /console/live?page=queues|jobs|job|cluster[&queue=][&id=]: the open
// page's live updates, as server-sent events, for a logged-in session:
//
//   - "health" every 2 s on every page: the quorum this member reaches
//     (the banner) and, on the cluster page, every member's row;
//   - "stats" every second on the queues page: the queue rows and the
//     charts' series;
//   - "job" on the jobs page (its queue) and the job page (its job): each
//     committed job event from the controller's watch stream as this
//     member applies it (the API's event fields: never payload or result
//     bytes).
//
// The page updates itself in place; it never reloads.
func (c *console) live(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(r); !ok {
		http.Error(w, "not logged in (or the session expired)", http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	page := q.Get("page")
	var filter *jobraft.WatchFilter
	switch page {
	case "queues", "cluster":
	case "jobs":
		if queue := q.Get("queue"); queue != "" {
			filter = &jobraft.WatchFilter{Queues: []string{queue}}
		}
	case "job":
		id := q.Get("id")
		if checkJobID(id) != nil {
			http.Error(w, "id: not a job ID", http.StatusBadRequest)
			return
		}
		filter = &jobraft.WatchFilter{JobID: id}
	default:
		http.Error(w, "page must be queues, jobs, job or cluster", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var events <-chan jobraft.Event
	if filter != nil {
		evs, err := c.s.ctl.Watch(ctx, 0, *filter)
		if err != nil {
			http.Error(w, "watch: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		events = evs
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			c.s.log.Error("console live", "event", event, "error", err)
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // a reader that stops is cut
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	// Health takes up to ~2 s to compute when a member does not answer:
	// off this loop, so that stats and events keep flowing meanwhile.
	healths := make(chan *clusterHealth, 1)
	go func() {
		tick := time.NewTicker(healthTTL)
		defer tick.Stop()
		for {
			hh := c.health(ctx, healthTTL)
			select {
			case healths <- hh:
			case <-ctx.Done():
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	stats := func() bool {
		if page != "queues" {
			return true
		}
		rows, st := c.queueRows(ctx)
		return send("stats", liveStats{Applied: st.AppliedIndex, Queues: rows, Series: c.feed.series(time.Now())})
	}
	if !stats() {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case hh := <-healths:
			if !send("health", liveHealthOf(hh, page == "cluster")) {
				return
			}
		case <-tick.C:
			if !stats() {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Kind == jobraft.EventError {
				// Compacted (this page fell far behind) or closed: the
				// page reloads its data; nothing is skipped silently.
				send("resync", map[string]string{"reason": ev.Err.Error()})
				return
			}
			if !send("job", eventOf(ev)) {
				return
			}
		}
	}
}

// liveStats is the queues page's "stats" event.
type liveStats struct {
	Applied uint64      `json:"applied"`
	Queues  []queueRow  `json:"queues"`
	Series  chartSeries `json:"series"`
}

// liveHealth is the "health" event: the banner's text, and the rows on
// the cluster page.
type liveHealth struct {
	*clusterHealth
	Banner string `json:"banner"`
}

func liveHealthOf(h *clusterHealth, rows bool) liveHealth {
	out := *h
	if !rows {
		out.Members = nil
	}
	return liveHealth{clusterHealth: &out, Banner: h.Banner()}
}
