package client

import (
	"context"
	"net/url"
	"time"
)

// ScheduleRequest creates a schedule (POST /v1/schedules): at each tick of
// Cron (read in Zone, an IANA name; "" is UTC) or of Every, the cluster
// creates one job of the template (Queue, Kind, Payload, Priority,
// MaxAttempts), named by the schedule and the tick. Overlap is "allow"
// (default), "skip" (while a job of the schedule is pending, scheduled or
// running) or "one" (at most one waiting); CatchUp is "one" (default:
// ticks missed while the cluster could not fire fire once) or "skip".
type ScheduleRequest struct {
	ID          string   `json:"id"`
	Cron        string   `json:"cron,omitempty"`
	Every       Duration `json:"every,omitempty"`
	Zone        string   `json:"zone,omitempty"`
	Queue       string   `json:"queue"`
	Kind        string   `json:"kind"`
	Payload     []byte   `json:"payload,omitempty"`
	Priority    int32    `json:"priority,omitempty"`
	MaxAttempts uint32   `json:"max_attempts,omitempty"`
	Overlap     string   `json:"overlap,omitempty"`
	CatchUp     string   `json:"catch_up,omitempty"`
}

// Schedule is a schedule as jobd returns it: its definition, whether it is
// paused, its create, next and last tick (log times; Next nil when its
// expression has no tick left), and its counts: jobs Fired, ticks Skipped
// by the overlap policy and Missed by the catch-up policy.
type Schedule struct {
	ID          string     `json:"id"`
	Cron        string     `json:"cron,omitempty"`
	Every       Duration   `json:"every,omitempty"`
	Zone        string     `json:"zone,omitempty"`
	Queue       string     `json:"queue"`
	Kind        string     `json:"kind"`
	Payload     []byte     `json:"payload,omitempty"`
	PayloadText string     `json:"payload_text,omitempty"`
	Priority    int32      `json:"priority"`
	MaxAttempts uint32     `json:"max_attempts"`
	Overlap     string     `json:"overlap"`
	CatchUp     string     `json:"catch_up"`
	Paused      bool       `json:"paused"`
	Created     time.Time  `json:"created"`
	Next        *time.Time `json:"next,omitempty"`
	LastTick    *time.Time `json:"last_tick,omitempty"`
	Fired       uint64     `json:"fired"`
	Skipped     uint64     `json:"skipped"`
	Missed      uint64     `json:"missed"`
	// New (the reply of a create only): false when a schedule of this
	// ID existed with this definition (a repeated create).
	New *bool `json:"new,omitempty"`
}

// ScheduleList is GET /v1/schedules's reply, in ID order.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// CreateSchedule creates a schedule, resending after an unknown outcome (a
// repeat of the same definition succeeds). A schedule of this ID with
// another definition is refused (409 schedule_exists, ErrRefused).
func (c *Client) CreateSchedule(ctx context.Context, req ScheduleRequest) (Schedule, error) {
	var s Schedule
	err := c.resend(ctx, &call{method: "POST", path: "/v1/schedules", in: req, out: &s, mutates: true}, nil)
	return s, err
}

// GetSchedule reads one schedule (ErrNotFound: none of this ID).
func (c *Client) GetSchedule(ctx context.Context, id string) (Schedule, error) {
	var s Schedule
	err := c.do(ctx, &call{method: "GET", path: "/v1/schedules/" + url.PathEscape(id), out: &s})
	return s, err
}

// ListSchedules reads every schedule.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var l ScheduleList
	err := c.do(ctx, &call{method: "GET", path: "/v1/schedules", out: &l})
	return l.Schedules, err
}

// PauseSchedule stops a schedule firing; ResumeSchedule fires it again from
// its next tick. Both are idempotent and resent after an unknown outcome.
func (c *Client) PauseSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.setSchedule(ctx, id, "pause")
}

// ResumeSchedule resumes a paused schedule.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.setSchedule(ctx, id, "resume")
}

func (c *Client) setSchedule(ctx context.Context, id, op string) (Schedule, error) {
	var s Schedule
	err := c.resend(ctx, &call{method: "POST", path: "/v1/schedules/" + url.PathEscape(id) + "/" + op, out: &s, mutates: true}, nil)
	return s, err
}

// DeleteSchedule deletes a schedule (its jobs stay), resending after an
// unknown outcome. A resend that finds no schedule is not a success: the
// schedule is gone, but this call or another may have deleted it, so the
// answer is ErrOutcomeUnknown (wrapping ErrNotFound), as the library's.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.resend(ctx, &call{method: "DELETE", path: "/v1/schedules/" + url.PathEscape(id), mutates: true}, nil)
}
