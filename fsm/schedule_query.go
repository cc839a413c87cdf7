package fsm

import (
	"bytes"
	"slices"
	"time"
)

// Schedule returns the schedule with the given ID; its slices are copies,
// the caller's to keep and write.
func (m *Jobs) Schedule(id string) (Schedule, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sc := m.st.scheduleShared(id)
	if sc == nil {
		return Schedule{}, false
	}
	return sc.owned(), true
}

// Schedules returns every schedule in ID order; their slices are copies,
// the caller's to keep and write.
func (m *Jobs) Schedules() []Schedule {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Schedule
	if m.st.sch.tree != nil {
		m.st.sch.tree.Scan(func(e *schedEnt) bool {
			out = append(out, e.s.owned())
			return true
		})
	}
	return out
}

// ScheduleDue reports when the next schedule is due, as a wait from now, a
// reading of the current leader's clock (translated into the log's time
// as LogTime does): 0 when one is due now (a FireCmd would fire it), ok
// false when no running schedule has a tick left. O(schedules).
func (m *Jobs) ScheduleDue(now time.Time) (wait time.Duration, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.st.sch.tree == nil {
		return 0, false
	}
	t := m.st.clock.at(toNanos(now))
	var next int64
	m.st.sch.tree.Scan(func(e *schedEnt) bool {
		if sc := e.s; !sc.Paused && !sc.Next.IsZero() {
			if n := toNanos(sc.Next); !ok || n < next {
				next, ok = n, true
			}
		}
		return true
	})
	if !ok || next <= t {
		return 0, ok
	}
	return time.Duration(subSat(next, t)), true
}

// scheduleShared looks a schedule up for a query (under the read lock; the
// apply goroutine's schedule uses no scratch either).
func (s *state) scheduleShared(id string) *Schedule { return s.schedule(id) }

// owned is *s with every slice copied (the template's payload, the zone's
// shifts, the open jobs): writing into it changes nothing in the state.
func (s *Schedule) owned() Schedule {
	o := *s
	o.Job.Payload = bytes.Clone(o.Job.Payload)
	o.Zone.Shifts = slices.Clone(o.Zone.Shifts)
	o.Open = slices.Clone(o.Open)
	return o
}
