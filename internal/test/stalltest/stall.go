// Package stalltest measures the test process's own scheduling stalls, so
// a liveness bound can tell "the system was slow" from "the process was not
// running".
//
// One watcher goroutine per process (started by the first Watch or Start)
// sleeps Tick at a time and records how late each wake-up is. A wake-up
// later than Grace means the process, or this goroutine inside it, was not
// scheduled for that long: the machine was saturated, the runtime stopped
// the world, the process was paused. The stall is the sum of those
// lateness intervals overlapping a window.
//
// Callers' duties:
//  1. Use stalls only to widen LIVENESS bounds (how long something may
//     take). A safety check (what must never happen) is never widened,
//     skipped or excused by a stall.
//  2. Print the measured stall in every liveness failure (Window.Report),
//     so a reader can judge whether the stall explains it.
//
// Widening is by the measured stall, not by a multiple of it: a bound that
// fails with a small stall failed on its own.
//
// The package also measures the process's CPU time (CPU, CPUWindow) and
// fits what operations cost in it (FitCost): a bound on what an event
// costs a process on a shared machine is stated in its CPU, which the
// machine's other load does not move (cpu.go).
package stalltest

import (
	"fmt"
	"sync"
	"time"
)

// Tick is the watcher's period.
const Tick = 10 * time.Millisecond

// Grace is the lateness of a wake-up that is timer jitter, not a stall.
const Grace = 2 * time.Millisecond

// maxEvents bounds the recorded history; the oldest half is dropped past it
// (several minutes of continuous stalls at one event per Tick).
const maxEvents = 1 << 16

// Stall is what the watcher measured over a window.
type Stall struct {
	Total time.Duration // sum of the late intervals inside the window
	Max   time.Duration // the longest single late interval (its part inside the window)
	Count int           // late wake-ups overlapping the window
}

// String prints the stall for a failure message.
func (s Stall) String() string {
	if s.Count == 0 {
		return "measured stall 0"
	}
	return fmt.Sprintf("measured stall %v (%d late ticks, longest %v)",
		s.Total.Round(time.Millisecond), s.Count, s.Max.Round(time.Millisecond))
}

// event is one late wake-up: the process was stalled during [from, to).
type event struct{ from, to time.Time }

// history is the watcher's record: a pure structure, tested on its own.
type history struct {
	events []event   // in time order
	last   time.Time // the last wake-up (late or not); zero before the first
}

// add records the wake-up at now, expected at want.
func (h *history) add(want, now time.Time) {
	h.last = now
	if late := now.Sub(want); late > Grace {
		if len(h.events) >= maxEvents {
			h.events = append(h.events[:0], h.events[len(h.events)/2:]...)
		}
		h.events = append(h.events, event{from: want, to: now})
	}
}

// between sums the late intervals overlapping [from, to). A wake-up that is
// overdue at to (the watcher itself has not run yet: the stall is still in
// progress) counts up to to.
func (h *history) between(from, to time.Time) Stall {
	var s Stall
	over := func(a, b time.Time) {
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if d := b.Sub(a); d > 0 {
			s.Total += d
			s.Count++
			if d > s.Max {
				s.Max = d
			}
		}
	}
	for i := len(h.events) - 1; i >= 0; i-- {
		e := h.events[i]
		if !e.to.After(from) {
			break
		}
		over(e.from, e.to)
	}
	if !h.last.IsZero() {
		if want := h.last.Add(Tick); to.Sub(want) > Grace {
			over(want, to)
		}
	}
	return s
}

// worst returns the largest stall total inside any span-long window within
// [from, to): how long the process stood still in its worst stretch of
// that length. (A window covering the most stall can start where a late
// interval starts, or end where one ends; both are tried.)
func (h *history) worst(from, to time.Time, span time.Duration) time.Duration {
	var starts []time.Time
	for i := len(h.events) - 1; i >= 0; i-- {
		e := h.events[i]
		if !e.to.After(from) {
			break
		}
		starts = append(starts, e.from, e.to.Add(-span))
	}
	if !h.last.IsZero() {
		if want := h.last.Add(Tick); to.Sub(want) > Grace {
			starts = append(starts, want, to.Add(-span))
		}
	}
	var best time.Duration
	for _, a := range starts {
		if a.Before(from) {
			a = from
		}
		b := a.Add(span)
		if b.After(to) {
			b = to
		}
		best = max(best, h.between(a, b).Total)
	}
	return best
}

var watcher struct {
	once sync.Once
	mu   sync.Mutex
	h    history
}

// Watch starts the process's watcher if it is not running yet. It runs
// until the process exits.
func Watch() {
	watcher.once.Do(func() {
		watcher.mu.Lock()
		watcher.h.last = time.Now()
		watcher.mu.Unlock()
		go watch()
	})
}

func watch() {
	for {
		watcher.mu.Lock()
		want := watcher.h.last.Add(Tick)
		watcher.mu.Unlock()
		time.Sleep(Tick) // the measurement itself: how late does this return?
		now := time.Now()
		watcher.mu.Lock()
		watcher.h.add(want, now)
		watcher.mu.Unlock()
	}
}

// Between returns the stall measured in [from, to). Only stalls since
// Watch was first called are known.
func Between(from, to time.Time) Stall {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	return watcher.h.between(from, to)
}

// Worst returns the largest stall inside any span-long stretch of
// [from, to): e.g. whether the process stood still for most of a leader's
// lease at some point.
func Worst(from, to time.Time, span time.Duration) time.Duration {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	return watcher.h.worst(from, to, span)
}

// Window is a liveness measurement that started at a point in time.
type Window struct{ start time.Time }

// Start starts the watcher (if needed) and a window now.
func Start() Window {
	Watch()
	return Window{start: time.Now()}
}

// StartAt starts a window at an earlier instant (for a clock the caller
// started before, e.g. when an operation began). Stalls before the watcher
// first ran are not known.
func StartAt(t time.Time) Window {
	Watch()
	return Window{start: t}
}

// Began returns the window's start.
func (w Window) Began() time.Time { return w.start }

// Elapsed returns the time since the window started.
func (w Window) Elapsed() time.Duration { return time.Since(w.start) }

// Stall returns the stall measured since the window started.
func (w Window) Stall() Stall { return Between(w.start, time.Now()) }

// Worst returns the largest stall inside any span-long stretch of the
// window so far.
func (w Window) Worst(span time.Duration) time.Duration { return Worst(w.start, time.Now(), span) }

// Exceeded reports whether the window has run longer than bound plus the
// stall measured during it.
func (w Window) Exceeded(bound time.Duration) bool {
	now := time.Now()
	return now.Sub(w.start) > bound+Between(w.start, now).Total
}

// Report describes the window against bound for a message:
// "5.31s (bound 5s + measured stall 420ms (31 late ticks, longest 95ms))".
func (w Window) Report(bound time.Duration) string {
	now := time.Now()
	return fmt.Sprintf("%v (bound %v + %v)", now.Sub(w.start).Round(time.Millisecond), bound, Between(w.start, now))
}
