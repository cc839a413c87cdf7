package fsm

import "time"

// Schedule returns the schedule with the given ID.
func (m *Jobs) Schedule(id string) (Schedule, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sc := m.st.scheduleShared(id)
	if sc == nil {
		return Schedule{}, false
	}
	return *sc, true
}

// Schedules returns every schedule in ID order. Slices in them are shared
// with the state machine: read only.
func (m *Jobs) Schedules() []Schedule {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Schedule
	if m.st.sch.tree != nil {
		m.st.sch.tree.Scan(func(e *schedEnt) bool {
			out = append(out, *e.s)
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
