package catchup

import "time"

// Rate estimates a per-second rate from a cumulative counter observed at
// increasing times (bytes or entries streamed to a member). It smooths
// over roughly Window. The zero value is usable (Window defaults to 5s).
type Rate struct {
	Window time.Duration

	at    time.Time
	total uint64
	rate  float64
	set   bool
}

// Observe records the counter's total at now and returns the rate per
// second. A counter that went back (a restart) starts over.
func (r *Rate) Observe(now time.Time, total uint64) float64 {
	w := r.Window
	if w <= 0 {
		w = 5 * time.Second
	}
	if !r.set || total < r.total || !now.After(r.at) {
		if !r.set || total < r.total {
			r.at, r.total, r.set, r.rate = now, total, true, 0
		}
		return r.rate
	}
	dt := now.Sub(r.at)
	inst := float64(total-r.total) / dt.Seconds()
	// Exponential smoothing, weighted by the interval's share of the window.
	a := min(dt.Seconds()/w.Seconds(), 1)
	r.rate = a*inst + (1-a)*r.rate
	r.at, r.total = now, total
	return r.rate
}

// Per returns the last estimate.
func (r *Rate) Per() float64 { return r.rate }

// ETA is how long remaining takes at rate per second (0 when nothing
// remains, -1 when the rate is 0: unknown).
func ETA(remaining uint64, rate float64) time.Duration {
	if remaining == 0 {
		return 0
	}
	if rate <= 0 {
		return -1
	}
	return time.Duration(float64(remaining) / rate * float64(time.Second))
}
