package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// GET /v1/jobs?queue=&state=&cursor=&limit=&consistency=: one page of a
// queue's jobs or, without queue, of every queue's (the dead jobs of the
// whole cluster: state=dead), queue by queue in name order; within a
// queue, in state order, each state in the library's order (jobraft.List).
func (s *server) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	f := jobraft.ListFilter{Queue: q.Get("queue"), Consistency: cons}
	if st := q.Get("state"); st != "" {
		if f.State, err = parseState(st); err != nil {
			return err
		}
	}
	p := jobraft.Page{Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		if p.Limit, err = strconv.Atoi(l); err != nil || p.Limit < 1 || p.Limit > fsm.MaxListLimit {
			return bad("limit must be 1..%d", fsm.MaxListLimit)
		}
	}
	var page jobraft.JobPage
	if f.Queue == "" {
		page, err = s.listQueues(r.Context(), f, p)
	} else {
		page, err = s.ctl.List(r.Context(), f, p)
	}
	if err != nil {
		return err
	}
	jobs := make([]client.Job, len(page.Jobs))
	for i, j := range page.Jobs {
		jobs[i] = jobOf(j)
	}
	writeJSON(w, http.StatusOK, client.JobPage{Jobs: jobs, Next: page.Next})
	return nil
}

// listQueues lists across every queue: after one read of the consistency
// asked for (a linearizable one reaches the cluster's committed state),
// each queue from this member's state, in name order. Its cursor is
// "q" + the queue's name (base64url) + "." + the cursor within that queue;
// a queue name followed by a NUL byte (no queue name holds one) stands for
// "after that queue".
func (s *server) listQueues(ctx context.Context, f jobraft.ListFilter, p jobraft.Page) (jobraft.JobPage, error) {
	from, inner, err := parseQueuesCursor(p.Cursor)
	if err != nil {
		return jobraft.JobPage{}, err
	}
	var st jobraft.Stats
	if f.Consistency == jobraft.Linearizable {
		if st, err = s.ctl.Stats(ctx); err != nil {
			return jobraft.JobPage{}, err
		}
	} else {
		st = s.ctl.LocalStats()
	}
	limit := p.Limit
	if limit <= 0 {
		limit = fsm.DefaultListLimit
	}
	var out jobraft.JobPage
	for _, q := range st.Queues {
		if q.Name < from {
			continue
		}
		cur := ""
		if q.Name == from {
			cur = inner
		}
		pg, err := s.ctl.List(ctx, jobraft.ListFilter{Queue: q.Name, State: f.State, Consistency: jobraft.Local},
			jobraft.Page{Cursor: cur, Limit: limit - len(out.Jobs)})
		if err != nil {
			return jobraft.JobPage{}, err
		}
		out.Jobs = append(out.Jobs, pg.Jobs...)
		switch {
		case pg.Next != "":
			out.Next = queuesCursor(q.Name, pg.Next)
			return out, nil
		case len(out.Jobs) == limit:
			out.Next = queuesCursor(q.Name+"\x00", "")
			return out, nil
		}
	}
	return out, nil
}

func queuesCursor(queue, inner string) string {
	return "q" + base64.RawURLEncoding.EncodeToString([]byte(queue)) + "." + inner
}

func parseQueuesCursor(c string) (queue, inner string, err error) {
	if c == "" {
		return "", "", nil
	}
	enc, inner, ok := strings.Cut(strings.TrimPrefix(c, "q"), ".")
	name, derr := base64.RawURLEncoding.DecodeString(enc)
	if !strings.HasPrefix(c, "q") || !ok || derr != nil {
		return "", "", bad("cursor %q is not one a listing without queue returned", c)
	}
	return string(name), inner, nil
}
