package fsm

import (
	"reflect"
	"slices"
	"sort"
	"time"

	"pgregory.net/rapid"
)

// The reference model's schedules: a map of public Schedule values,
// firing by walking every tick one by one. Only the tick arithmetic
// (ScheduleDef.tickAfter) and validation are shared with the real thing.

func cloneScheds(in map[string]*Schedule) map[string]*Schedule {
	out := map[string]*Schedule{}
	for id, sc := range in {
		cp := *sc
		cp.Open = slices.Clone(sc.Open)
		out[id] = &cp
	}
	return out
}

func (m *model) schedule(c Command, nowNs int64, r *Result) {
	if m.scheds == nil {
		m.scheds = map[string]*Schedule{}
	}
	now := fromNanos(nowNs)
	snap := func(sc *Schedule) *Schedule {
		cp := *sc
		cp.Open = slices.Clone(sc.Open)
		return &cp
	}
	switch c := c.(type) {
	case *ScheduleCmd:
		if old, ok := m.scheds[c.Def.ID]; ok {
			if !sameDef(&old.ScheduleDef, &c.Def) {
				r.Code = CodeScheduleExists
				return
			}
			r.Schedule = snap(old)
			return
		}
		sc := &Schedule{ScheduleDef: c.Def, Created: now}
		sc.Next = fromNanos(c.Def.tickAfter(nowNs, nowNs))
		m.scheds[sc.ID] = sc
		r.Schedule, r.Changed = snap(sc), true
	case *ScheduleSetCmd:
		sc, ok := m.scheds[c.ID]
		if !ok {
			r.Code = CodeScheduleNotFound
			return
		}
		switch c.Op {
		case ScheduleDelete:
			delete(m.scheds, c.ID)
			r.Changed = true
		case SchedulePause, ScheduleResume:
			pause := c.Op == SchedulePause
			if sc.Paused != pause {
				sc.Paused, r.Changed = pause, true
				if !pause {
					sc.Next = fromNanos(sc.ScheduleDef.tickAfter(toNanos(sc.Created), nowNs))
				}
			}
		}
		r.Schedule = snap(sc)
	case *FireCmd:
		var ids []string
		for id := range m.scheds {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			sc := m.scheds[id]
			if sc.Paused || sc.Next.IsZero() || sc.Next.After(now) {
				continue
			}
			r.Changed = true
			var due []time.Time
			for t := sc.Next; !t.IsZero() && !t.After(now); t = fromNanos(sc.ScheduleDef.tickAfter(toNanos(sc.Created), toNanos(t))) {
				due = append(due, t)
				sc.Next = fromNanos(sc.ScheduleDef.tickAfter(toNanos(sc.Created), toNanos(t)))
			}
			cur := due[len(due)-1]
			missed := due[:len(due)-1]
			if len(missed) > 0 && sc.CatchUp == CatchUpOne {
				m.fireTick(sc, missed[0], now, r)
				missed = missed[1:]
			}
			sc.Missed += uint64(len(missed))
			m.fireTick(sc, cur, now, r)
			sc.LastTick = cur
		}
	}
}

func (m *model) fireTick(sc *Schedule, tick, now time.Time, r *Result) {
	if sc.Overlap != OverlapAllow {
		var open []string
		queued := false
		for _, id := range sc.Open {
			if j, ok := m.jobs[id]; ok && !j.State.Terminal() {
				open = append(open, id)
				queued = queued || j.State == StatePending || j.State == StateScheduled
			}
		}
		sc.Open = open
		if (sc.Overlap == OverlapSkip && len(open) > 0) || (sc.Overlap == OverlapOne && queued) {
			sc.Skipped++
			return
		}
	}
	id := ScheduleJobID(sc.ID, tick)
	sc.Fired++
	m.seq++
	t := sc.Job
	j := &Job{ID: id, Queue: t.Queue, Kind: t.Kind, Payload: t.Payload, Priority: t.Priority, MaxAttempts: t.MaxAttempts,
		Backoff: t.Backoff.withDefaults(), State: StatePending, RunAt: now, Created: now, Updated: now, Seq: m.seq}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	m.jobs[id] = j
	if sc.Overlap != OverlapAllow {
		sc.Open = append(sc.Open, id)
	}
	r.Fired = append(r.Fired, id)
}

var nyZone, _ = LoadZone("America/New_York")

// genScheduleCmd draws a schedule command for the differential test: a
// few IDs, definitions that repeat or clash, intervals and cron
// expressions (some invalid), pause, resume, delete and fire (often).
func genScheduleCmd(t *rapid.T) Command {
	id := rapid.SampledFrom([]string{"s1", "s2", "s3", ""}).Draw(t, "schedid")
	switch rapid.IntRange(0, 5).Draw(t, "schedop") {
	case 0, 1:
		d := ScheduleDef{ID: id, Job: Template{Queue: queuesGen.Draw(t, "squeue"), Kind: kindsGen.Draw(t, "skind"),
			Payload: []byte(rapid.SampledFrom([]string{"", "p"}).Draw(t, "spayload"))},
			Overlap: Overlap(rapid.IntRange(0, 3).Draw(t, "overlap")), CatchUp: CatchUp(rapid.IntRange(0, 2).Draw(t, "catchup"))}
		if rapid.Bool().Draw(t, "cron") {
			d.Cron = rapid.SampledFrom([]string{"*/3 * * * * *", "*/7 * * * * *", "0 * * * * *", "bad", "* * * * *"}).Draw(t, "spec")
			if rapid.Bool().Draw(t, "zone") {
				d.Zone = nyZone
			}
		} else {
			d.Every = rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 0, time.Millisecond}).Draw(t, "every")
		}
		return &ScheduleCmd{Def: d}
	case 2:
		return &ScheduleSetCmd{ID: id, Op: ScheduleOp(rapid.IntRange(0, 4).Draw(t, "setop"))}
	}
	return &FireCmd{}
}

// checkSchedules compares the schedule queries with the model.
func (w *world) checkSchedules(t *rapid.T) {
	var want []Schedule
	var ids []string
	for id := range w.ref.scheds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var next time.Time
	due := false
	for _, id := range ids {
		sc := w.ref.scheds[id]
		want = append(want, *sc)
		if !sc.Paused && !sc.Next.IsZero() && (!due || sc.Next.Before(next)) {
			next, due = sc.Next, true
		}
		if got, ok := w.real.Schedule(id); !ok || !reflect.DeepEqual(got, *sc) {
			t.Fatalf("Schedule(%q) = %+v %v, model %+v", id, got, ok, *sc)
		}
	}
	if got := w.real.Schedules(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Schedules() = %+v\nmodel %+v", got, want)
	}
	wait, ok := w.real.ScheduleDue(w.now)
	wantWait := time.Duration(0)
	if at := w.ref.clk.at(w.now); due && next.After(at) {
		wantWait = next.Sub(at)
	}
	if ok != due || wait != wantWait {
		t.Fatalf("ScheduleDue(%v) = %v %v, model %v %v", w.now, wait, ok, wantWait, due)
	}
}
