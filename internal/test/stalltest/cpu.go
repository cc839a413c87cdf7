package stalltest

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// CPU returns the CPU time (user and system, every thread, the runtime's
// own included) the process has used since it started.
func CPU() time.Duration {
	cpu, _ := usage()
	return cpu
}

// usage returns CPU and the context switches (voluntary and involuntary)
// of the process's threads since it started.
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		// Getrusage fails only for a bad argument: a programmer's bug.
		panic(fmt.Sprintf("stalltest: getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw + ru.Nivcsw)
}

// CPUWindow measures a cumulative count (operations done) against the CPU
// time the process used, from its start to End.
//
// Why per CPU: on a machine whose other processes' load moves, a rate per
// wall second measures mostly the share of the cores the process got; the
// work the process does per operation does not move with it. A cost that
// adds CPU work per operation (streaming, encoding, a restore in the same
// process) lowers the rate per CPU-second by its share. A cost that makes
// the process wait without working (a lock, a blocked loop) does not show
// in it: bound that by other means.
type CPUWindow struct {
	count func() int64
	n     int64
	cpu   time.Duration
	sw    int64
	start time.Time
}

// StartCPU collects the garbage (runtime.GC) and starts a window over
// count. A window so starts with no collection in progress or due: a
// collection of a heap of many jobs takes 100 ms of CPU or more and would
// otherwise land in one window and not in the next, as much as a cost
// being measured; one the window's own allocations bring about counts.
func StartCPU(count func() int64) CPUWindow {
	Watch()
	runtime.GC()
	cpu, sw := usage()
	return CPUWindow{count: count, n: count(), cpu: cpu, sw: sw, start: time.Now()}
}

// End ends the window now and returns what it measured.
func (w CPUWindow) End() Rate {
	n, end := w.count(), time.Now()
	cpu, sw := usage()
	return Rate{N: n - w.n, CPU: cpu - w.cpu, Switches: sw - w.sw, Wall: end.Sub(w.start), Stall: Between(w.start, end).Total}
}

// Rate is what a CPUWindow measured.
type Rate struct {
	N     int64         // operations counted in the window
	CPU   time.Duration // CPU time the process used in it
	Wall  time.Duration // the window's length
	Stall time.Duration // scheduling stalls measured in it (Between)
	// Switches counts the context switches of the process's threads in
	// it (voluntary and involuntary): reported, not modelled.
	Switches int64
}

// PerCPU is the operations per CPU-second (0 without CPU time).
func (r Rate) PerCPU() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.N) / r.CPU.Seconds()
}

// PerRan is the operations per second of the window the process ran
// (its length less the measured stalls).
func (r Rate) PerRan() float64 {
	ran := r.Wall - r.Stall
	if ran <= 0 {
		return 0
	}
	return float64(r.N) / ran.Seconds()
}

// Cores is the process's CPU time per wall second in the window: how many
// cores it used on average.
func (r Rate) Cores() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return r.CPU.Seconds() / r.Wall.Seconds()
}

// String prints the window for a log line:
// "1234/CPU-s (617 in 0.50 CPU-s over 1.00 s, 0.50 cores; 1100/s ran;
// 1.20 switches per operation)".
func (r Rate) String() string {
	perOp := 0.0
	if r.N > 0 {
		perOp = float64(r.Switches) / float64(r.N)
	}
	return fmt.Sprintf("%.0f/CPU-s (%d in %.2f CPU-s over %.2f s, %.2f cores; %.0f/s ran; %.2f switches per operation)",
		r.PerCPU(), r.N, r.CPU.Seconds(), r.Wall.Seconds(), r.Cores(), r.PerRan(), perOp)
}

// Cost models the process's CPU time over a window: Idle CPU-seconds per
// wall second (what it spends whatever it does: heartbeats, timers,
// polls, the runtime's scheduler) plus Per for each operation counted.
// Fitted on windows around an event, it gives the CPU a window of the
// event's length and count would have cost without the event.
type Cost struct {
	Idle float64       // CPU-seconds per wall second, without operations
	Per  time.Duration // CPU per operation
}

// FitCost fits the model to windows by least squares; with five windows or
// more it fits again without the one the first fit explains worst (a
// window that caught a burst: a garbage collection cycle, a stall of the
// machine's disk). A fit with a negative term keeps the other alone (all
// CPU per operation, or all per second); no windows fit the zero Cost.
func FitCost(rs []Rate) Cost {
	c := fitCost(rs)
	if len(rs) < 5 {
		return c
	}
	worst, far := 0, -1.0
	for i, r := range rs {
		if d := math.Abs(r.CPU.Seconds() - c.Expected(r).Seconds()); d > far {
			worst, far = i, d
		}
	}
	return fitCost(append(slices.Clone(rs[:worst]), rs[worst+1:]...))
}

func fitCost(rs []Rate) Cost {
	var ww, nn, wn, wy, ny, sw, sn, sy float64
	for _, r := range rs {
		w, n, y := r.Wall.Seconds(), float64(r.N), r.CPU.Seconds()
		ww, nn, wn, wy, ny = ww+w*w, nn+n*n, wn+w*n, wy+w*y, ny+n*y
		sw, sn, sy = sw+w, sn+n, sy+y
	}
	if det := ww*nn - wn*wn; det > 0 {
		idle, per := (wy*nn-ny*wn)/det, (ny*ww-wy*wn)/det
		if idle >= 0 && per >= 0 {
			return Cost{Idle: idle, Per: time.Duration(per * float64(time.Second))}
		}
		if idle < 0 && sn > 0 {
			return Cost{Per: time.Duration(sy / sn * float64(time.Second))}
		}
	}
	if sw > 0 {
		return Cost{Idle: sy / sw}
	}
	return Cost{}
}

// Expected is the CPU the model gives a window of r's length and count.
func (c Cost) Expected(r Rate) time.Duration {
	return time.Duration(c.Idle*float64(r.Wall)) + time.Duration(r.N)*c.Per
}

// Excess is the share of r's CPU beyond what the model expects of it (0
// or below: none). It is the cost the event in r put on the process as a
// fraction of its CPU: where the process's CPU is what limits its
// operations (a loaded machine), the rate of operations drops by that
// fraction.
func (c Cost) Excess(r Rate) float64 {
	if r.CPU <= 0 {
		return 0
	}
	return 1 - c.Expected(r).Seconds()/r.CPU.Seconds()
}

// String prints the model: "0.21 cores idle + 52µs per operation".
func (c Cost) String() string {
	return fmt.Sprintf("%.2f cores idle + %v per operation", c.Idle, c.Per.Round(100*time.Nanosecond))
}

// Judgement is Judge's verdict on a window.
type Judgement struct {
	// Excess is the window's share of its CPU beyond what the cost fitted
	// around it expects of it (Cost.Excess).
	Excess float64
	// Noise is how far the same model misses windows with no event in
	// them: the largest |Excess| of a window around, judged by the cost
	// fitted on the others (Noise). An excess within it cannot be told
	// from how the process's CPU per operation moves on its own.
	Noise float64
}

// Exceeds reports whether the excess is beyond bound by more than the
// noise: the event cost more than bound, whatever the noise made of it.
func (j Judgement) Exceeds(bound float64) bool { return j.Excess > bound+j.Noise }

// Noise is the largest |Excess| of one of the windows around under the
// cost fitted (FitCost) on the others: the measurement's own error where
// nothing happened. On a quiet machine a few per cent; on one whose every
// core is busy with other work the process's CPU per operation moves by
// a fifth or more from one window to the next (the Go runtime's thread
// hand-offs: windows that spend more CPU per operation also show more
// context switches per operation, see Rate.String), and a bound tighter
// than that would fail whether the event cost anything or not.
func Noise(around []Rate) float64 { return noise(misses(around)) }

// misses is each window's Excess under the cost fitted on the others.
func misses(around []Rate) []float64 {
	out := make([]float64, len(around))
	for i, r := range around {
		others := append(slices.Clone(around[:i]), around[i+1:]...)
		out[i] = FitCost(others).Excess(r)
	}
	return out
}

func noise(misses []float64) float64 {
	n := 0.0
	for _, m := range misses {
		n = max(n, math.Abs(m))
	}
	return n
}

// Judge fits the cost on the six windows around (three before, three
// after, in that order), logs the fit, the window under test and each
// window around it with its own excess (fitted on the other five), and
// returns the verdict on during. what names the window under test; after
// names what the last three follow.
func Judge(t testing.TB, what, after string, around []Rate, during Rate) Judgement {
	t.Helper()
	cost := FitCost(around)
	miss := misses(around)
	j := Judgement{Excess: cost.Excess(during), Noise: noise(miss)}
	t.Logf("%s: the test process's CPU %.2f s, %.2f s expected of its %d operations and %.2f s at the cost around it (%v): %.0f%% excess; windows around it miss the cost fitted on the others by up to %.0f%%",
		what, during.CPU.Seconds(), cost.Expected(during).Seconds(), during.N, during.Wall.Seconds(), cost, 100*j.Excess, 100*j.Noise)
	t.Logf("%s: %v", what, during)
	for i, r := range around {
		when := "before"
		if i >= 3 {
			when = after
		}
		t.Logf("window %d (%s): %v; %.0f%% excess", i, when, r, 100*miss[i])
	}
	return j
}
