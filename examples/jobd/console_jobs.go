package main

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobraft/jobraft"
)

// The jobs page lists a queue's jobs newest first (by their last change),
// filtered by state, kind and idempotency key, fifty a page with links both
// ways, and acts on the jobs selected on it (bulk retry and cancel).

const (
	jobsPageSize = 50
	// jobsScanLimit bounds the jobs one listing reads: newest first needs
	// the whole selection (the controller lists in each state's index
	// order), so a larger one is read only this far (the page says so).
	jobsScanLimit = 100000
	// bulkMax bounds the jobs one bulk action names (a page's worth).
	bulkMax = 100
)

// jobsQuery is the jobs page's form.
type jobsQuery struct {
	Queue, State, ID, Kind, Key string
	Before, After               string // cursors: "<updated unix ns>.<seq>"
}

func (q jobsQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"queue": q.Queue, "state": q.State, "kind": q.Kind, "key": q.Key} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// jobKey orders jobs by their last change, then submit sequence.
type jobKey struct {
	updated int64
	seq     uint64
}

func keyOf(j jobraft.Job) jobKey { return jobKey{j.Updated.UnixNano(), j.Seq} }

func (k jobKey) less(o jobKey) bool {
	return k.updated < o.updated || k.updated == o.updated && k.seq < o.seq
}

func (k jobKey) String() string {
	return strconv.FormatInt(k.updated, 10) + "." + strconv.FormatUint(k.seq, 10)
}

func parseJobKey(s string) (jobKey, error) {
	a, b, ok := strings.Cut(s, ".")
	u, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return jobKey{}, bad("cursor %q: want <updated>.<seq>", s)
	}
	return jobKey{u, n}, nil
}

// jobListing is one page of a newest-first listing.
type jobListing struct {
	Jobs         []jobraft.Job
	Newer, Older template.URL // the neighbouring pages ("" none)
	Scanned      int
	Truncated    bool
}

// listNewest reads the selection (at most jobsScanLimit jobs), keeps the
// jobs that match kind and key, and returns the page before (older than)
// q.Before, after (newer than) q.After, or the newest.
func (c *console) listNewest(ctx context.Context, q jobsQuery, st jobraft.State) (jobListing, error) {
	var out jobListing
	var before, after *jobKey
	for s, dst := range map[string]**jobKey{q.Before: &before, q.After: &after} {
		if s != "" {
			k, err := parseJobKey(s)
			if err != nil {
				return out, err
			}
			*dst = &k
		}
	}
	// keep holds the candidates: the newest page (or the page just newer
	// than After), trimmed as the scan goes.
	var keep []jobraft.Job
	newer, older := false, false
	trim := func() {
		slices.SortFunc(keep, func(a, b jobraft.Job) int {
			if keyOf(b).less(keyOf(a)) {
				return -1
			}
			return 1
		})
		if len(keep) > jobsPageSize {
			if after != nil {
				newer = true
				keep = keep[len(keep)-jobsPageSize:] // the ones just above After
			} else {
				older = true
				keep = keep[:jobsPageSize]
			}
		}
	}
	f := jobraft.ListFilter{Queue: q.Queue, State: st, Consistency: jobraft.Local}
	pg := jobraft.Page{Limit: 1000}
	for {
		res, err := c.s.ctl.List(ctx, f, pg)
		if err != nil {
			return out, err
		}
		for _, j := range res.Jobs {
			out.Scanned++
			if q.Kind != "" && j.Kind != q.Kind || q.Key != "" && j.IdempotencyKey != q.Key {
				continue
			}
			k := keyOf(j)
			switch {
			case before != nil && !k.less(*before):
				newer = true
				continue
			case after != nil && !after.less(k):
				older = true
				continue
			}
			j.Payload = nil // the listing never shows it
			keep = append(keep, j)
			if len(keep) >= 4*jobsPageSize {
				trim()
			}
		}
		if res.Next == "" {
			break
		}
		if out.Scanned >= jobsScanLimit {
			out.Truncated = true
			break
		}
		pg.Cursor = res.Next
	}
	trim()
	out.Jobs = keep
	if len(keep) > 0 {
		if newer {
			v := q.values()
			v.Set("after", keyOf(keep[0]).String())
			out.Newer = template.URL("/console/jobs?" + v.Encode()) // built here from escaped values
		}
		if older {
			v := q.values()
			v.Set("before", keyOf(keep[len(keep)-1]).String())
			out.Older = template.URL("/console/jobs?" + v.Encode())
		}
	}
	return out, nil
}

// GET /console/jobs?queue=&state=&kind=&key=&before=|after=&id=: a queue's
// jobs newest first; id opens the job.
func (c *console) jobsPage(w http.ResponseWriter, r *http.Request, p *page) error {
	v := r.URL.Query()
	q := jobsQuery{Queue: v.Get("queue"), State: v.Get("state"), ID: strings.TrimSpace(v.Get("id")),
		Kind: v.Get("kind"), Key: v.Get("key"), Before: v.Get("before"), After: v.Get("after")}
	if q.ID != "" {
		if err := checkJobID(q.ID); err != nil {
			return err
		}
		if _, err := c.s.ctl.Get(r.Context(), q.ID, jobraft.Local); err != nil {
			return err
		}
		http.Redirect(w, r, "/console/job?"+url.Values{"id": {q.ID}}.Encode(), http.StatusSeeOther)
		return nil
	}
	var queues []string
	for _, qi := range c.s.ctl.LocalStats().Queues {
		queues = append(queues, qi.Name)
	}
	if q.Queue == "" && len(queues) > 0 {
		q.Queue = queues[0]
	}
	var st jobraft.State
	if q.State != "" {
		s, err := parseState(q.State)
		if err != nil {
			return err
		}
		st = s
	}
	var l jobListing
	if slices.Contains(queues, q.Queue) {
		var err error
		if l, err = c.listNewest(r.Context(), q, st); err != nil {
			return err
		}
	}
	p.Title, p.Nav, p.Live = "Jobs", "jobs", "jobs"
	if q.Queue != "" {
		p.LiveQuery = url.Values{"queue": {q.Queue}}.Encode()
	}
	p.Data = map[string]any{"Q": q, "Queues": queues, "States": consoleStates, "L": l, "ScanLimit": jobsScanLimit,
		"FirstPage": q.Before == "" && q.After == "", "Return": r.URL.RawQuery, "BulkMax": bulkMax}
	c.render(w, http.StatusOK, "jobs", p)
	return nil
}

// bulkOutcome is one job's outcome of a bulk action.
type bulkOutcome struct {
	ID    string
	OK    bool
	State string // after the action (OK)
	Kind  string // the refusal's kind (not OK)
	Why   string // the refusal's reason (not OK)
}

// POST /console/jobs/bulk (action=retry|cancel, id..., reason, return):
// the action on each job in turn, each job's outcome shown as the
// controller answered it (a refused one says why).
func (c *console) bulk(w http.ResponseWriter, r *http.Request, p *page) error {
	action := r.PostForm.Get("action")
	if action != "retry" && action != "cancel" {
		return bad("action must be retry or cancel")
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return bad("select at least one job")
	}
	if len(ids) > bulkMax {
		return bad("at most %d jobs at a time (%d selected)", bulkMax, len(ids))
	}
	for _, id := range ids {
		if err := checkJobID(id); err != nil {
			return err
		}
	}
	reason := r.PostForm.Get("reason")
	if reason == "" {
		reason = "canceled in the web console (bulk)"
	}
	var out []bulkOutcome
	ok := 0
	start := time.Now()
	for _, id := range ids {
		var j jobraft.Job
		var err error
		if action == "retry" {
			j, err = c.s.ctl.Retry(r.Context(), id)
		} else {
			j, err = c.s.ctl.Cancel(r.Context(), id, reason)
		}
		o := bulkOutcome{ID: id}
		if err != nil {
			_, o.Kind, o.Why = classify(err, "")
			o.Why = nameLeaders(o.Why, c.s.ctl.Node().Status().Members)
		} else {
			o.OK, o.State = true, j.State.String()
			ok++
		}
		out = append(out, o)
	}
	back := "/console/jobs"
	if ret := r.PostForm.Get("return"); ret != "" {
		if _, err := url.ParseQuery(ret); err == nil {
			back += "?" + ret
		}
	}
	p.Title, p.Nav = "Bulk "+action, "jobs"
	p.Data = map[string]any{"Action": action, "Outcomes": out, "OK": ok, "Failed": len(out) - ok,
		"Took": time.Since(start).Round(time.Millisecond), "Back": back}
	c.render(w, http.StatusOK, "bulk", p)
	return nil
}

// bytesPreview shows a payload or result: text when it is UTF-8 (the
// template escapes it), else a hex dump; at most previewMax bytes.
type bytesPreview struct {
	Size  int
	Shown int
	Text  string
	Hex   string
}

const previewMax = 64 << 10

func previewOf(b []byte) bytesPreview {
	p := bytesPreview{Size: len(b)}
	head := b[:min(len(b), previewMax)]
	p.Shown = len(head)
	if validUTF8Prefix(head, len(b) > previewMax) {
		p.Text = string(head)
	} else {
		p.Hex = hexDump(head)
	}
	return p
}

// Truncated says whether the preview shows less than all of it.
func (p bytesPreview) Truncated() bool { return p.Shown < p.Size }

// Note is the preview's length line.
func (p bytesPreview) Note() string {
	how := "text (UTF-8)"
	if p.Hex != "" {
		how = "hex (not UTF-8)"
	}
	if p.Truncated() {
		return fmt.Sprintf("%d bytes, the first %d shown as %s", p.Size, p.Shown, how)
	}
	return fmt.Sprintf("%d bytes, shown as %s", p.Size, how)
}

// validUTF8Prefix: b is UTF-8, except that when cut (a prefix of more
// bytes) its last rune may be incomplete.
func validUTF8Prefix(b []byte, cut bool) bool {
	if utf8.Valid(b) {
		return true
	}
	if !cut {
		return false
	}
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			return utf8.Valid(b[:len(b)-i])
		}
	}
	return false
}
