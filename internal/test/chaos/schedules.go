package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// schedQueue is the queue the workload's schedules fire into (nothing
// claims from it: overlap allow, every tick a pending job).
const schedQueue = "sched"

// schedClient is the client index of the schedule client (after the
// model, bulk and dependency clients: their random streams are unchanged).
const schedClient = modelClients + bulkClients + depsClients

// workloadSchedules draws the run's schedules from its seed: one by
// interval (1 or 2 s), one by cron (every second or every other), each
// with a catch-up policy drawn.
func workloadSchedules(rng *rand.Rand) []clustertest.ScheduleSpec {
	policy := func() string { return []string{"one", "skip"}[rng.IntN(2)] }
	return []clustertest.ScheduleSpec{
		{ID: "sch-every", Queue: schedQueue, Every: time.Duration(1+rng.IntN(2)) * time.Second, CatchUp: policy()},
		{ID: "sch-cron", Queue: schedQueue, Cron: []string{"* * * * * *", "*/2 * * * * *"}[rng.IntN(2)], CatchUp: policy()},
	}
}

// scheduleClient creates the run's schedules (retrying until a create is
// acknowledged) and then repeats the creates now and then: a repeat of the
// same definition must succeed, never be refused as another definition.
func (w *workload) scheduleClient(c int, rng *rand.Rand) {
	specs := workloadSchedules(rng)
	w.mu.Lock()
	w.specs = specs
	w.mu.Unlock()
	acked := make([]bool, len(specs))
	for !w.stopped() {
		k := rng.IntN(len(specs))
		sp := specs[k]
		rep, op := w.call(c, rng, "schedule", "/schedule", clustertest.Request{Schedule: &sp}, Op{Job: sp.ID})
		if op.Outcome == clustertest.OutcomeError && strings.Contains(rep.Error, "schedule exists") {
			w.r.violate(Verdict{Checker: "schedule", At: op.Call, Detail: fmt.Sprintf("a repeated create of %s with its definition was refused: %s", sp.ID, rep.Error)})
		}
		w.record(op)
		if op.Outcome == clustertest.OutcomeOK {
			acked[k] = true
		}
		pause := 2 * time.Second
		for _, a := range acked {
			if !a {
				pause = 100 * time.Millisecond
			}
		}
		select {
		case <-w.stop:
		case <-time.After(pause):
		}
	}
}

// scheduleCheck: on every judged member, each schedule whose create was
// acknowledged exists (in a lie run one acknowledged at or after the lie
// began may be lost: excused), and every schedule it holds created exactly
// one job per tick from its create to its next tick, none early, the
// ticks without one missed by its catch-up policy (clustertest.CheckTicks on
// one consistent read: its jobs and the schedule at one applied index).
// Then each has fired up to the present: its next tick is after the wall
// clock at the check's start, less one period (firing resumed after the
// heal), within the convergence bound.
func (r *runner) scheduleCheck(ops []Op, lieAt time.Duration) Verdict {
	if r.lists == nil {
		return Verdict{Checker: "schedule", OK: true, Detail: "not checked: the members did not converge"}
	}
	r.wl.mu.Lock()
	specs := r.wl.specs
	r.wl.mu.Unlock()
	ackedAt := map[string]time.Duration{}
	for _, op := range ops {
		if op.Kind == "schedule" && op.Outcome == clustertest.OutcomeOK {
			if at, ok := ackedAt[op.Job]; !ok || op.Return < at {
				ackedAt[op.Job] = op.Return
			}
		}
	}
	start := time.Now()
	fired, missed, excused := 0, 0, 0
	for _, i := range r.judged() {
		for _, sp := range specs {
			s, jobs, err := r.readSchedule(i, sp.ID)
			if err != nil {
				return Verdict{Checker: "schedule", At: r.since(), Detail: fmt.Sprintf("m%d: %v", i, err)}
			}
			if s == nil {
				at, acked := ackedAt[sp.ID]
				switch {
				case !acked:
				case lieAt >= 0 && at >= lieAt:
					excused++
				default:
					return Verdict{Checker: "schedule", At: r.since(), Detail: fmt.Sprintf("m%d lost schedule %s, whose create was acknowledged at %s", i, sp.ID, at.Round(time.Millisecond))}
				}
				continue
			}
			if bad := clustertest.CheckTicks(*s, jobs); len(bad) > 0 {
				return Verdict{Checker: "schedule", At: r.since(), Detail: fmt.Sprintf("m%d: schedule %s (%s, catch-up %s; fired %d, missed %d): %s", i, sp.ID, period(sp), sp.CatchUp, s.Fired, s.Missed, strings.Join(bad, "; "))}
			}
			fired, missed = fired+int(s.Fired), missed+int(s.Missed)
		}
	}
	if v := r.schedulesCaughtUp(specs, start); v != nil {
		return *v
	}
	detail := fmt.Sprintf("%d jobs fired and %d ticks missed (catch-up) by %d schedules (%s), judged on %d members", fired, missed, len(specs), specText(specs), len(r.judged()))
	if lieAt >= 0 {
		detail += fmt.Sprintf("; %d lost schedules excused (created at or after the lie began at %s)", excused, lieAt.Round(time.Millisecond))
	}
	return Verdict{Checker: "schedule", OK: true, Detail: detail}
}

func period(sp clustertest.ScheduleSpec) string {
	if sp.Cron != "" {
		return "cron " + sp.Cron
	}
	return "every " + sp.Every.String()
}

// readSchedule reads schedule id and its queue's jobs on member i at one
// applied index (the schedule keeps firing: a read is retried until the
// member's applied index is the same before and after it). A nil schedule:
// the member holds none of that ID.
func (r *runner) readSchedule(i int, id string) (*clustertest.ScheduleView, []clustertest.JobView, error) {
	for try := 0; try < 50; try++ {
		before, err := r.p.CallT(i, "/status", clustertest.Request{}, time.Second)
		if err != nil {
			return nil, nil, err
		}
		srep, err := r.p.CallT(i, "/schedule-get", clustertest.Request{ID: id, Local: true}, 5*time.Second)
		if err != nil {
			return nil, nil, err
		}
		if srep.Outcome != clustertest.OutcomeOK && !strings.Contains(srep.Error, "schedule not found") {
			return nil, nil, fmt.Errorf("schedule-get %s: %s", id, srep.Error)
		}
		lrep, err := r.p.CallT(i, "/list", clustertest.Request{Queue: schedQueue, Local: true}, 10*time.Second)
		if err != nil || lrep.Outcome != clustertest.OutcomeOK {
			return nil, nil, fmt.Errorf("list %s: %v %s", schedQueue, err, lrep.Error)
		}
		after, err := r.p.CallT(i, "/status", clustertest.Request{}, time.Second)
		if err != nil {
			return nil, nil, err
		}
		if before.Applied == after.Applied {
			return srep.Schedule, lrep.Jobs, nil
		}
	}
	return nil, nil, fmt.Errorf("no read of schedule %s at one applied index in 50 tries", id)
}

// schedulesCaughtUp waits, within the convergence bound, until the final
// leader's schedules have fired up to the present: each next tick is
// after start less two periods.
func (r *runner) schedulesCaughtUp(specs []clustertest.ScheduleSpec, start time.Time) *Verdict {
	deadline := time.Now().Add(r.o.Converge)
	for _, sp := range specs {
		slack := 2 * sp.Every
		if sp.Cron != "" {
			slack = 4 * time.Second
		}
		for {
			var s *clustertest.ScheduleView
			if i := r.p.Leader(); i >= 0 {
				rep, err := r.p.CallT(i, "/schedule-get", clustertest.Request{ID: sp.ID, Local: true}, time.Second)
				if err == nil && rep.Outcome != clustertest.OutcomeOK && strings.Contains(rep.Error, "schedule not found") {
					break // never created (its creates all failed): nothing to fire
				}
				if err == nil {
					s = rep.Schedule
				}
			}
			if s != nil && time.Unix(0, s.Next).After(start.Add(-slack)) {
				break
			}
			if time.Now().After(deadline) {
				return &Verdict{Checker: "schedule", At: r.since(), Detail: fmt.Sprintf("schedule %s did not catch up within %s after the final phase: its next tick is still before %s", sp.ID, r.o.Converge, start.Add(-slack).UTC().Format(time.RFC3339Nano))}
			}
			time.Sleep(100 * time.Millisecond) // poll interval
		}
	}
	return nil
}

func specText(specs []clustertest.ScheduleSpec) string {
	var parts []string
	for _, sp := range specs {
		parts = append(parts, period(sp)+" catch-up "+sp.CatchUp)
	}
	return strings.Join(parts, ", ")
}
