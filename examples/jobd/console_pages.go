package main

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
)

// consoleStates are the states in the order pages show them.
var consoleStates = func() []string {
	var out []string
	for st := jobraft.StatePending; st.Valid(); st++ {
		out = append(out, st.String())
	}
	return out
}()

// historyLine is one thing the job page knows about a job's past.
type historyLine struct {
	Time time.Time
	What string
}

// GET /console/job?id=[&payload=1][&result=1]: the job's fields, the
// history its fields tell, the events this member saw since it started,
// and the payload's and result's sizes (their bytes only with payload=1,
// result=1: text when UTF-8, else hex).
func (c *console) jobPage(w http.ResponseWriter, r *http.Request, p *page) error {
	id := r.URL.Query().Get("id")
	if err := checkJobID(id); err != nil {
		return err
	}
	j, err := c.s.ctl.Get(r.Context(), id, jobraft.Local)
	if err != nil {
		return err
	}
	deps, err := c.s.ctl.Dependents(r.Context(), id, jobraft.Local)
	if err != nil {
		return err
	}
	data := map[string]any{"Job": j, "PayloadSize": len(j.Payload), "ResultSize": len(j.Result),
		"History": derivedHistory(j), "Events": c.feed.jobEvents(id), "Dependents": deps,
		"Scheduled": j.RunAt.After(j.Created),
		"CanRetry":  j.State == jobraft.StateDead || j.State == jobraft.StateCanceled, "CanCancel": !j.State.Terminal()}
	since, start := c.feed.started()
	data["FeedSince"], data["FeedStart"] = since, start
	if r.URL.Query().Get("payload") == "1" {
		data["Payload"] = previewOf(j.Payload)
	}
	if r.URL.Query().Get("result") == "1" {
		data["Result"] = previewOf(j.Result)
	}
	p.Title, p.Nav, p.Live, p.LiveQuery = "Job "+j.ID, "jobs", "job", url.Values{"id": {j.ID}}.Encode()
	p.Data = data
	c.render(w, http.StatusOK, "job", p)
	return nil
}

// derivedHistory is what a job's fields say about its past: when it was
// submitted and due, its attempts, the current lease, how the last lease
// ended (by its token) and the last error, and when it finished.
func derivedHistory(j jobraft.Job) []historyLine {
	h := []historyLine{{j.Created, "submitted to queue " + j.Queue + " as kind " + j.Kind}}
	if !j.RunAt.IsZero() && j.RunAt.After(j.Created) {
		h = append(h, historyLine{j.RunAt, "due (run_at)"})
	}
	if j.Attempts > 0 {
		h = append(h, historyLine{What: plural(int(j.Attempts), "attempt") + " claimed so far, of at most " + itoa(int(j.MaxAttempts))})
	}
	if j.LastLease != nil {
		h = append(h, historyLine{What: "lease token " + itoa(int(j.LastLease.Token)) + " ended: " + j.LastLease.By.String()})
	}
	if j.Lease != nil {
		h = append(h, historyLine{What: "running: lease token " + itoa(int(j.Lease.Token)) + " held by worker " + j.Lease.Worker +
			" until " + j.Lease.Deadline.UTC().Format(time.RFC3339Nano)})
	}
	if j.LastError != "" {
		h = append(h, historyLine{What: "last error: " + j.LastError})
	}
	if !j.Finished.IsZero() {
		h = append(h, historyLine{j.Finished, "finished: " + j.State.String()})
	} else {
		h = append(h, historyLine{j.Updated, "last change: now " + j.State.String()})
	}
	return h
}

// POST /console/job/retry (id)
func (c *console) retry(w http.ResponseWriter, r *http.Request, _ *page) error {
	id := r.PostForm.Get("id")
	if err := checkJobID(id); err != nil {
		return err
	}
	j, err := c.s.ctl.Retry(r.Context(), id)
	if err != nil {
		return err
	}
	done(w, r, "/console/job", url.Values{"id": {id}}, "retried: now "+j.State.String())
	return nil
}

// POST /console/job/cancel (id, reason)
func (c *console) cancel(w http.ResponseWriter, r *http.Request, _ *page) error {
	id := r.PostForm.Get("id")
	if err := checkJobID(id); err != nil {
		return err
	}
	reason := r.PostForm.Get("reason")
	if reason == "" {
		reason = "canceled in the web console"
	}
	j, err := c.s.ctl.Cancel(r.Context(), id, reason)
	if err != nil {
		return err
	}
	done(w, r, "/console/job", url.Values{"id": {id}}, "canceled: now "+j.State.String())
	return nil
}

// POST /console/queues/pause and /resume (queue)
func (c *console) pause(w http.ResponseWriter, r *http.Request, _ *page) error {
	return c.pauseResume(w, r, true)
}

func (c *console) resume(w http.ResponseWriter, r *http.Request, _ *page) error {
	return c.pauseResume(w, r, false)
}

func (c *console) pauseResume(w http.ResponseWriter, r *http.Request, pause bool) error {
	q := r.PostForm.Get("queue")
	if q == "" || len(q) > fsm.MaxNameLen {
		return bad("queue: 1 to %d bytes", fsm.MaxNameLen)
	}
	if !slices.ContainsFunc(c.s.ctl.LocalStats().Queues, func(qi fsm.QueueInfo) bool { return qi.Name == q }) {
		return &clientError{code: http.StatusNotFound, kind: "not_found", reason: "no queue " + q}
	}
	op, verb := c.s.ctl.Resume, "resumed"
	if pause {
		op, verb = c.s.ctl.Pause, "paused"
	}
	if err := op(r.Context(), q); err != nil {
		return err
	}
	done(w, r, "/console/queues", nil, "queue "+q+" "+verb)
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return itoa(n) + " " + what + "s"
}

// hexDump shows binary bytes as hex, 32 bytes a line.
func hexDump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 32 {
		sb.WriteString(hex.EncodeToString(b[i:min(i+32, len(b))]))
		sb.WriteByte('\n')
	}
	return sb.String()
}
