package jobraft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Schedule is a periodic schedule as the state machine holds it: its
// definition, its next tick and its counts (fsm.Schedule).
type Schedule = fsm.Schedule

// Overlap and catch-up policies of a schedule (fsm.Overlap, fsm.CatchUp).
type (
	Overlap = fsm.Overlap
	CatchUp = fsm.CatchUp
)

// Policies.
const (
	OverlapAllow = fsm.OverlapAllow
	OverlapSkip  = fsm.OverlapSkip
	OverlapOne   = fsm.OverlapOne
	CatchUpOne   = fsm.CatchUpOne
	CatchUpSkip  = fsm.CatchUpSkip
)

// ScheduleRequest creates a schedule: at each tick of Cron (in Zone) or
// Every, the leader's duty creates one job of the template (Queue, Kind,
// Payload, Priority, MaxAttempts, Backoff) whose ID is
// fsm.ScheduleJobID(ID, tick), so a tick can never create two.
type ScheduleRequest struct {
	ID string
	// Cron is a cron expression (5 fields, or 6 with seconds first, or a
	// descriptor such as @daily); Every an interval (at least
	// fsm.MinInterval). Exactly one.
	Cron  string
	Every time.Duration
	// Zone is an IANA zone name for Cron's wall clock ("" is UTC). Its
	// rules are resolved here, on the member that takes the request, and
	// kept with the schedule: every member fires at the same instants.
	Zone        string
	Queue, Kind string
	Payload     []byte
	Priority    int32
	MaxAttempts uint32
	Backoff     fsm.Backoff
	Overlap     Overlap
	CatchUp     CatchUp
}

// def is the request's definition, its zone resolved and the config's
// defaults applied (MaxAttempts, Backoff, as Submit does).
func (c *Controller) scheduleDef(r *ScheduleRequest) (fsm.ScheduleDef, error) {
	z, err := fsm.LoadZone(r.Zone)
	if err != nil {
		return fsm.ScheduleDef{}, mapErr(err)
	}
	d := fsm.ScheduleDef{ID: r.ID, Cron: r.Cron, Every: r.Every, Zone: z, Overlap: r.Overlap, CatchUp: r.CatchUp,
		Job: fsm.Template{Queue: r.Queue, Kind: r.Kind, Payload: r.Payload, Priority: r.Priority, MaxAttempts: r.MaxAttempts, Backoff: r.Backoff}}
	if d.Job.MaxAttempts == 0 {
		d.Job.MaxAttempts = c.cfg.MaxAttempts
	}
	if d.Job.Backoff == (fsm.Backoff{}) {
		d.Job.Backoff = c.cfg.Backoff
	}
	if len(d.Job.Payload) > c.cfg.MaxPayload {
		return fsm.ScheduleDef{}, &classed{class: ErrInvalidRequest, cause: fmt.Errorf("%w: payload of %d bytes (max %d)", fsm.ErrTooLarge, len(d.Job.Payload), c.cfg.MaxPayload)}
	}
	if err := fsm.Validate(fsm.ScheduleCmd{Def: d}); err != nil {
		return fsm.ScheduleDef{}, mapErr(err)
	}
	return d, nil
}

// CreateSchedule creates a schedule. created is false when a schedule of
// this ID existed with the same definition (a repeated create, possibly an
// earlier attempt of this very call whose answer was lost): nothing
// changed. Errors: ErrInvalidRequest wrapping fsm.ErrBadCron,
// fsm.ErrBadInterval, fsm.ErrUnknownZone or fsm.ErrInvalidCommand for bad
// input; ErrScheduleExists when the ID has another definition; and the
// operation outcome classes.
func (c *Controller) CreateSchedule(ctx context.Context, req ScheduleRequest) (s Schedule, created bool, err error) {
	d, err := c.scheduleDef(&req)
	if err != nil {
		return Schedule{}, false, err
	}
	r, err := c.applyResolving(ctx, &fsm.ScheduleCmd{Def: d}, "", nil)
	if err != nil {
		return Schedule{}, false, err
	}
	return *r.Schedule, r.Changed, nil
}

// GetSchedule returns a schedule, or ErrScheduleNotFound.
func (c *Controller) GetSchedule(ctx context.Context, id string, cons Consistency) (Schedule, error) {
	if err := c.read(ctx, cons); err != nil {
		return Schedule{}, err
	}
	s, ok := c.jobs.Schedule(id)
	if !ok {
		return Schedule{}, fmt.Errorf("%w: %q", ErrScheduleNotFound, id)
	}
	return s, nil
}

// ListSchedules returns every schedule in ID order.
func (c *Controller) ListSchedules(ctx context.Context, cons Consistency) ([]Schedule, error) {
	if err := c.read(ctx, cons); err != nil {
		return nil, err
	}
	return c.jobs.Schedules(), nil
}

// PauseSchedule stops a schedule firing (ticks while paused never fire);
// ResumeSchedule fires it again from the first tick after the resume.
// Both are idempotent. ErrScheduleNotFound for an unknown ID.
func (c *Controller) PauseSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.setSchedule(ctx, id, fsm.SchedulePause)
}

// ResumeSchedule resumes a paused schedule.
func (c *Controller) ResumeSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.setSchedule(ctx, id, fsm.ScheduleResume)
}

// DeleteSchedule removes a schedule; the jobs it created stay.
// ErrScheduleNotFound when there is none (a delete whose earlier attempt
// had an unknown outcome and then finds none is ErrOutcomeUnknown).
func (c *Controller) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.setSchedule(ctx, id, fsm.ScheduleDelete)
	return err
}

func (c *Controller) setSchedule(ctx context.Context, id string, op fsm.ScheduleOp) (Schedule, error) {
	r, err := c.applyResolving(ctx, &fsm.ScheduleSetCmd{ID: id, Op: op}, "", nil)
	if err != nil {
		return Schedule{}, err
	}
	if r.Schedule == nil {
		return Schedule{}, classify(errors.New("jobraft: empty result")) // ErrOutcomeUnknown
	}
	return *r.Schedule, nil
}
