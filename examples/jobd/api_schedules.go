package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// What a caller does about an unknown outcome of a schedule route: every
// one is safe to repeat (a create of the same definition answers the
// schedule, pause and resume are idempotent, a repeated delete answers
// 404 schedule_not_found once it is gone).
const adviceSchedule = "retry the same request: a create of the same definition, a pause or a resume repeated is harmless; a delete repeated answers 404 schedule_not_found once the schedule is gone"

// scheduleJSON is a create's body: the client's request, whose payload
// jobd also accepts as text (payload_text; not both).
type scheduleJSON struct {
	client.ScheduleRequest
	PayloadText *string `json:"payload_text"`
}

func (j *scheduleJSON) request() (jobraft.ScheduleRequest, error) {
	if j.ID == "" || j.Queue == "" || j.Kind == "" {
		return jobraft.ScheduleRequest{}, bad("id, queue and kind are required")
	}
	if j.PayloadText != nil && j.Payload != nil {
		return jobraft.ScheduleRequest{}, bad("give payload (base64) or payload_text, not both")
	}
	if j.Every < 0 {
		return jobraft.ScheduleRequest{}, &clientError{code: http.StatusBadRequest, kind: "bad_interval", reason: "every is negative"}
	}
	overlap, ok := fsm.ParseOverlap(j.Overlap)
	if !ok {
		return jobraft.ScheduleRequest{}, bad("overlap %q: allow, skip or one", j.Overlap)
	}
	catchUp, ok := fsm.ParseCatchUp(j.CatchUp)
	if !ok {
		return jobraft.ScheduleRequest{}, bad("catch_up %q: one or skip", j.CatchUp)
	}
	req := jobraft.ScheduleRequest{ID: j.ID, Cron: j.Cron, Every: time.Duration(j.Every), Zone: j.Zone, Queue: j.Queue, Kind: j.Kind,
		Payload: j.Payload, Priority: j.Priority, MaxAttempts: j.MaxAttempts, Overlap: overlap, CatchUp: catchUp}
	if j.PayloadText != nil {
		req.Payload = []byte(*j.PayloadText)
	}
	return req, nil
}

// scheduleOf is a schedule on the wire.
func scheduleOf(s jobraft.Schedule) client.Schedule {
	out := client.Schedule{ID: s.ID, Cron: s.Cron, Every: client.Duration(s.Every), Zone: s.Zone.Name, Queue: s.Job.Queue, Kind: s.Job.Kind,
		Payload: s.Job.Payload, PayloadText: textOf(s.Job.Payload), Priority: s.Job.Priority, MaxAttempts: s.Job.MaxAttempts,
		Overlap: s.Overlap.String(), CatchUp: s.CatchUp.String(), Paused: s.Paused, Created: s.Created,
		Fired: s.Fired, Skipped: s.Skipped, Missed: s.Missed}
	if !s.Next.IsZero() {
		t := s.Next
		out.Next = &t
	}
	if !s.LastTick.IsZero() {
		t := s.LastTick
		out.LastTick = &t
	}
	return out
}

// POST /v1/schedules: 201 created, 200 when a schedule of this ID existed
// with this definition (new false); 409 schedule_exists with another.
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var in scheduleJSON
	if err := decode(r, &in, false); err != nil {
		return err
	}
	req, err := in.request()
	if err != nil {
		return err
	}
	sc, created, err := s.ctl.CreateSchedule(r.Context(), req)
	if err != nil {
		return err
	}
	out := scheduleOf(sc)
	out.New = &created
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, out)
	return nil
}

// GET /v1/schedules (?consistency=local for this member's state).
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	all, err := s.ctl.ListSchedules(r.Context(), cons)
	if err != nil {
		return err
	}
	out := client.ScheduleList{Schedules: []client.Schedule{}}
	for _, sc := range all {
		out.Schedules = append(out.Schedules, scheduleOf(sc))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// GET /v1/schedules/{id}
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	sc, err := s.ctl.GetSchedule(r.Context(), r.PathValue("id"), cons)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleOf(sc))
	return nil
}

// POST /v1/schedules/{id}/pause and /resume: the schedule after.
func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.setSchedule(w, r, s.ctl.PauseSchedule)
}

func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.setSchedule(w, r, s.ctl.ResumeSchedule)
}

func (s *server) setSchedule(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, id string) (jobraft.Schedule, error)) error {
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	sc, err := op(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleOf(sc))
	return nil
}

// DELETE /v1/schedules/{id}: 204; its jobs stay.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	if err := s.ctl.DeleteSchedule(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// scheduleRefusals are the schedule refusals' replies: a bad cron
// expression, interval or zone (400, each its own kind), a schedule of the
// ID with another definition (409), none of the ID (404).
var scheduleRefusals = []schedRefusal{
	{fsm.ErrBadCron, http.StatusBadRequest, "bad_cron", jobraft.ErrInvalidRequest},
	{fsm.ErrBadInterval, http.StatusBadRequest, "bad_interval", jobraft.ErrInvalidRequest},
	{fsm.ErrUnknownZone, http.StatusBadRequest, "unknown_zone", jobraft.ErrInvalidRequest},
	{jobraft.ErrScheduleExists, http.StatusConflict, "schedule_exists", jobraft.ErrScheduleExists},
	{jobraft.ErrScheduleNotFound, http.StatusNotFound, "schedule_not_found", jobraft.ErrScheduleNotFound},
}

// schedRefusal is one schedule refusal's reply: the error it matches, the
// status and kind, and the class whose text the reason drops.
type schedRefusal struct {
	sentinel error
	code     int
	kind     string
	class    error
}

// scheduleRefusal returns err's schedule refusal, nil when it is none.
func scheduleRefusal(err error) *schedRefusal {
	for i := range scheduleRefusals {
		if errors.Is(err, scheduleRefusals[i].sentinel) {
			return &scheduleRefusals[i]
		}
	}
	return nil
}
