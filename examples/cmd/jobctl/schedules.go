package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// Flags of schedule-create.
var (
	fCron, fZone, fOverlap, fCatchUp string
	fEvery                           time.Duration
)

func init() {
	commands["schedule-create"] = &command{args: "", help: "create a periodic schedule: one job per tick of -cron (in -zone) or -every (a repeat of the same definition succeeds)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&fID, "id", "", "schedule ID, A-Z a-z 0-9 . _ - (required)")
			fs.StringVar(&fCron, "cron", "", `cron expression: 5 fields, 6 with seconds first, or @hourly, @daily, ...`)
			fs.DurationVar(&fEvery, "every", 0, "interval (at least 1s); give -cron or -every")
			fs.StringVar(&fZone, "zone", "", "IANA time zone of the cron expression (default UTC)")
			fs.StringVar(&fQueue, "queue", "", "queue of the jobs (required)")
			fs.StringVar(&fKind, "kind", "", "kind of the jobs (required)")
			fs.StringVar(&fPayload, "payload", "", "payload text of every job")
			fs.StringVar(&fPayloadFile, "payload-file", "", "read the payload from this file (- for stdin)")
			fs.IntVar(&fPriority, "priority", 0, "priority of the jobs (higher first)")
			fs.UintVar(&fMaxAttempts, "max-attempts", 0, "attempts before a job is dead (0: the cluster's default)")
			fs.StringVar(&fOverlap, "overlap", "", "allow (default), skip (while one runs or waits) or one (at most one waiting)")
			fs.StringVar(&fCatchUp, "catch-up", "", "ticks missed while the cluster could not fire: one (default: fire once) or skip")
		},
		run: scheduleCreate}
	commands["schedule-list"] = &command{args: "", help: "list the schedules with their next tick and counts", run: scheduleList}
	commands["schedule-get"] = &command{args: "ID", help: "show a schedule", run: scheduleGet}
	commands["schedule-pause"] = &command{args: "ID", help: "stop a schedule firing (ticks while paused never fire)", run: scheduleSet("pause")}
	commands["schedule-resume"] = &command{args: "ID", help: "fire a paused schedule again from its next tick", run: scheduleSet("resume")}
	commands["schedule-delete"] = &command{args: "ID", help: "delete a schedule (its jobs stay)", run: scheduleDelete}
}

func scheduleCreate(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("schedule-create takes no arguments (got %q)", args)
	}
	if err := missing("-id", fID, "-queue", fQueue, "-kind", fKind); err != nil {
		return err
	}
	if (fCron == "") == (fEvery == 0) {
		return usagef("give -cron or -every")
	}
	payload, err := payloadFlags()
	if err != nil {
		return err
	}
	s, err := e.c.CreateSchedule(ctx, client.ScheduleRequest{ID: fID, Cron: fCron, Every: client.Duration(fEvery), Zone: fZone,
		Queue: fQueue, Kind: fKind, Payload: payload, Priority: int32(fPriority), MaxAttempts: uint32(fMaxAttempts),
		Overlap: fOverlap, CatchUp: fCatchUp})
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, s)
	}
	what := "created"
	if s.New != nil && !*s.New {
		what = "existed already with this definition"
	}
	fmt.Fprintf(e.out, "schedule %s %s (next tick %s)\n", s.ID, what, tickText(s.Next))
	return nil
}

func tickText(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

func period(s client.Schedule) string {
	if s.Cron != "" {
		if s.Zone != "" {
			return s.Cron + " (" + s.Zone + ")"
		}
		return s.Cron
	}
	return "every " + time.Duration(s.Every).String()
}

func scheduleList(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("schedule-list takes no arguments")
	}
	all, err := e.c.ListSchedules(ctx)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, all)
	}
	t := newTable(e.out)
	t.row("ID", "WHEN", "QUEUE", "KIND", "NEXT", "PAUSED", "FIRED", "SKIPPED", "MISSED")
	for _, s := range all {
		t.row(s.ID, period(s), s.Queue, s.Kind, tickText(s.Next), s.Paused, s.Fired, s.Skipped, s.Missed)
	}
	return t.flush()
}

func scheduleGet(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the schedule ID")
	if err != nil {
		return err
	}
	s, err := e.c.GetSchedule(ctx, id)
	if err != nil {
		return err
	}
	return printSchedule(e, s)
}

func printSchedule(e *env, s client.Schedule) error {
	if e.g.json {
		return printJSON(e, s)
	}
	t := newTable(e.out)
	t.row("id", s.ID)
	t.row("when", period(s))
	t.row("job", fmt.Sprintf("queue %s, kind %s, priority %d, max attempts %d, payload %d bytes", s.Queue, s.Kind, s.Priority, s.MaxAttempts, len(s.Payload)))
	t.row("overlap", s.Overlap)
	t.row("catch-up", s.CatchUp)
	t.row("paused", s.Paused)
	t.row("created", s.Created.UTC().Format(time.RFC3339))
	t.row("next tick", tickText(s.Next))
	t.row("last tick", tickText(s.LastTick))
	t.row("fired", s.Fired)
	t.row("skipped", s.Skipped)
	t.row("missed", s.Missed)
	return t.flush()
}

func scheduleSet(op string) func(ctx context.Context, e *env, args []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		id, err := oneArg(args, "the schedule ID")
		if err != nil {
			return err
		}
		set := e.c.ResumeSchedule
		if op == "pause" {
			set = e.c.PauseSchedule
		}
		s, err := set(ctx, id)
		if err != nil {
			return err
		}
		return printSchedule(e, s)
	}
}

func scheduleDelete(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the schedule ID")
	if err != nil {
		return err
	}
	if err := e.c.DeleteSchedule(ctx, id); err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, map[string]string{"deleted": id})
	}
	fmt.Fprintf(e.out, "schedule %s deleted\n", id)
	return nil
}
