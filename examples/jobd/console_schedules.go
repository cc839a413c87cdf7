package main

import (
	"net/http"
	"net/url"

	"github.com/jobraft/jobraft"
)

// The schedules page: every schedule with its definition, next tick and
// counts, from this member's applied state, with pause, resume and delete.

func (c *console) scheduleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /console/schedules", c.get(c.schedulesPage))
	mux.HandleFunc("POST /console/schedules/pause", c.post(c.scheduleAction))
	mux.HandleFunc("POST /console/schedules/resume", c.post(c.scheduleAction))
	mux.HandleFunc("POST /console/schedules/delete", c.post(c.scheduleAction))
}

func (c *console) schedulesPage(w http.ResponseWriter, r *http.Request, p *page) error {
	all, err := c.s.ctl.ListSchedules(r.Context(), jobraft.Local)
	if err != nil {
		return err
	}
	p.Title, p.Nav = "Schedules", "schedules"
	p.Data = map[string]any{"Schedules": all, "Applied": c.s.ctl.LocalStats().AppliedIndex}
	c.render(w, http.StatusOK, "schedules", p)
	return nil
}

// scheduleAction pauses, resumes or deletes the form's schedule (by the
// path's last element) and redirects to the page with what it did.
func (c *console) scheduleAction(w http.ResponseWriter, r *http.Request, _ *page) error {
	id := r.PostForm.Get("id")
	if id == "" {
		return bad("no schedule id")
	}
	var verb string
	var err error
	switch r.URL.Path {
	case "/console/schedules/pause":
		verb = "paused"
		_, err = c.s.ctl.PauseSchedule(r.Context(), id)
	case "/console/schedules/resume":
		verb = "resumed"
		_, err = c.s.ctl.ResumeSchedule(r.Context(), id)
	default:
		verb = "deleted"
		err = c.s.ctl.DeleteSchedule(r.Context(), id)
	}
	if err != nil {
		return err
	}
	done(w, r, "/console/schedules", url.Values{}, "schedule "+id+" "+verb)
	return nil
}
