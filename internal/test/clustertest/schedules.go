package clustertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
)

// ScheduleSpec is a /schedule create: a schedule of kind "k" jobs on
// Queue, by Cron or Every, with a catch-up policy by name ("one", "skip").
type ScheduleSpec struct {
	ID      string        `json:"id"`
	Queue   string        `json:"queue"`
	Cron    string        `json:"cron,omitempty"`
	Every   time.Duration `json:"every,omitempty"`
	CatchUp string        `json:"catch_up,omitempty"`
}

// ScheduleView is a schedule as the member API reports it (times are log
// times in unix nanoseconds, 0: none).
type ScheduleView struct {
	ID       string        `json:"id"`
	Cron     string        `json:"cron,omitempty"`
	Every    time.Duration `json:"every,omitempty"`
	CatchUp  string        `json:"catch_up"`
	Created  int64         `json:"created"`
	Next     int64         `json:"next"`
	LastTick int64         `json:"last_tick,omitempty"`
	Fired    uint64        `json:"fired"`
	Skipped  uint64        `json:"skipped"`
	Missed   uint64        `json:"missed"`
}

func scheduleView(s jobraft.Schedule) *ScheduleView {
	ns := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	return &ScheduleView{ID: s.ID, Cron: s.Cron, Every: s.Every, CatchUp: s.CatchUp.String(), Created: ns(s.Created), Next: ns(s.Next),
		LastTick: ns(s.LastTick), Fired: s.Fired, Skipped: s.Skipped, Missed: s.Missed}
}

// scheduleRoutes adds POST /schedule (create Request.Schedule) and
// /schedule-get (Request.ID; Local for this member's state).
func scheduleRoutes(ctl *jobraft.Controller, handle func(string, func(context.Context, Request) Reply)) {
	handle("/schedule", func(ctx context.Context, r Request) Reply {
		if r.Schedule == nil {
			return Reply{Outcome: OutcomeError, Error: "no schedule"}
		}
		sp := r.Schedule
		cu, ok := fsm.ParseCatchUp(sp.CatchUp)
		if !ok {
			return Reply{Outcome: OutcomeError, Error: "bad catch-up policy"}
		}
		s, _, err := ctl.CreateSchedule(ctx, jobraft.ScheduleRequest{ID: sp.ID, Cron: sp.Cron, Every: sp.Every, Queue: sp.Queue, Kind: "k", CatchUp: cu})
		rep := classify(err)
		if err == nil {
			rep.Schedule = scheduleView(s)
		}
		return rep
	})
	handle("/schedule-get", func(ctx context.Context, r Request) Reply {
		cons := jobraft.Linearizable
		if r.Local {
			cons = jobraft.Local
		}
		s, err := ctl.GetSchedule(ctx, r.ID, cons)
		rep := classify(err)
		if err == nil {
			rep.Schedule = scheduleView(s)
		}
		return rep
	})
}

// CheckTicks judges a schedule with overlap allow from its final state s
// and every job of its queue (jobs of other schedules or none are left
// out by their IDs): each tick after its create and before its next tick
// created exactly one job, none early, unless its catch-up policy passed
// it. It returns what it found wrong (nil: nothing).
//
//   - every job of the schedule is named by a tick of its grid, after the
//     create and before s.Next, and was created at or after that tick;
//   - Fired equals the jobs, Missed the ticks without one;
//   - a tick without a job lies in a run of ticks missed together: under
//     catch-up one the run follows a job created at the same log time as
//     the job after the run (fired by the same entry: the run's catch-up
//     job and the current tick's); under either policy the job after the
//     run was created no earlier than the successor of every tick in it
//     (each was missed: its successor was due when the schedule fired).
func CheckTicks(s ScheduleView, jobs []JobView) []string {
	var bad []string
	def := fsm.ScheduleDef{ID: s.ID, Cron: s.Cron, Every: s.Every}
	created, next := time.Unix(0, s.Created), time.Unix(0, s.Next)
	prefix := "@" + s.ID + ":"
	byTick := map[int64]JobView{}
	for _, j := range jobs {
		rest, ok := strings.CutPrefix(j.ID, prefix)
		if !ok {
			continue
		}
		tick, err := time.Parse(time.RFC3339Nano, rest)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("job %s: not named by a tick", j.ID))
			continue
		case !def.NextTick(created, tick.Add(-1)).Equal(tick):
			bad = append(bad, fmt.Sprintf("job %s: tick off the schedule's grid", j.ID))
		case s.Next != 0 && !tick.Before(next):
			bad = append(bad, fmt.Sprintf("job %s: tick at or after the schedule's next %s", j.ID, next.UTC().Format(time.RFC3339Nano)))
		case j.Created.Before(tick):
			bad = append(bad, fmt.Sprintf("job %s: created %v before its tick (early)", j.ID, tick.Sub(j.Created)))
		}
		if _, dup := byTick[tick.UnixNano()]; dup {
			bad = append(bad, fmt.Sprintf("tick %s: two jobs", rest))
		}
		byTick[tick.UnixNano()] = j
	}
	if uint64(len(byTick)) != s.Fired {
		bad = append(bad, fmt.Sprintf("%d jobs, schedule counts %d fired", len(byTick), s.Fired))
	}
	// Walk the grid: runs of ticks without a job.
	var run []time.Time
	var before *JobView
	jobless := uint64(0)
	for t := def.NextTick(created, created); !t.IsZero() && (s.Next == 0 || t.Before(next)); t = def.NextTick(created, t) {
		j, ok := byTick[t.UnixNano()]
		if !ok {
			run = append(run, t)
			jobless++
			continue
		}
		if len(run) > 0 {
			last := run[len(run)-1]
			switch {
			case j.Created.Before(def.NextTick(created, last)):
				bad = append(bad, fmt.Sprintf("ticks %s..%s without a job, not missed: the next job was created before their successor", run[0].UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano)))
			case s.CatchUp == fsm.CatchUpOne.String() && (before == nil || !before.Created.Equal(j.Created)):
				bad = append(bad, fmt.Sprintf("ticks %s..%s without a job: under catch-up one the job before them was not fired with the one after", run[0].UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano)))
			}
			run = run[:0]
		}
		before = &j
	}
	if len(run) > 0 {
		bad = append(bad, fmt.Sprintf("%d ticks before the schedule's next without a job", len(run)))
	}
	if jobless != s.Missed {
		bad = append(bad, fmt.Sprintf("%d ticks without a job, schedule counts %d missed", jobless, s.Missed))
	}
	return bad
}
