package stalltest

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestFitCost(t *testing.T) {
	// Windows of a process spending 0.2 cores on its chores and 50 µs per
	// operation, at different rates and lengths.
	truth := Cost{Idle: 0.2, Per: 50 * time.Microsecond}
	var rs []Rate
	for _, w := range []struct {
		n    int64
		wall time.Duration
	}{{1000, time.Second}, {5000, time.Second}, {3000, 2 * time.Second}, {12000, 2 * time.Second}} {
		r := Rate{N: w.n, Wall: w.wall}
		r.CPU = truth.Expected(r)
		rs = append(rs, r)
	}
	got := FitCost(rs)
	if math.Abs(got.Idle-truth.Idle) > 1e-6 || (got.Per-truth.Per).Abs() > time.Nanosecond {
		t.Fatalf("FitCost = %v, want %v", got, truth)
	}
	// A window that spent a quarter more CPU than its count and length
	// cost around it: a fifth of its CPU is excess.
	ev := Rate{N: 4000, Wall: 1500 * time.Millisecond}
	ev.CPU = truth.Expected(ev) * 5 / 4
	if x := got.Excess(ev); math.Abs(x-0.2) > 1e-6 {
		t.Fatalf("Excess = %.4f, want 0.2", x)
	}
	if x := got.Excess(rs[2]); math.Abs(x) > 1e-6 {
		t.Fatalf("Excess of a fitted window = %.4f, want 0", x)
	}

	// Degenerate fits keep the non-negative term alone.
	same := []Rate{{N: 1000, Wall: time.Second, CPU: 100 * time.Millisecond}, {N: 2000, Wall: 2 * time.Second, CPU: 200 * time.Millisecond}}
	if got := FitCost(same); got.Idle < 0 || got.Per < 0 || (got.Expected(same[0])-same[0].CPU).Abs() > time.Millisecond {
		t.Fatalf("FitCost of proportional windows = %v", got)
	}
	negIdle := []Rate{{N: 1000, Wall: time.Second, CPU: 10 * time.Millisecond}, {N: 10000, Wall: time.Second, CPU: 500 * time.Millisecond}}
	if got := FitCost(negIdle); got.Idle != 0 || got.Per != 510*time.Millisecond/11000 {
		t.Fatalf("FitCost with a negative idle term = %v, want per operation only", got)
	}
	negPer := []Rate{{N: 1000, Wall: time.Second, CPU: 400 * time.Millisecond}, {N: 10000, Wall: time.Second, CPU: 200 * time.Millisecond}}
	if got := FitCost(negPer); got.Per != 0 || math.Abs(got.Idle-0.3) > 1e-9 {
		t.Fatalf("FitCost with a negative per-operation term = %v, want idle only", got)
	}
	// One window of five caught a burst (twice its CPU): the fit leaves it out.
	burst := append(slices.Clone(rs), Rate{N: 8000, Wall: time.Second})
	burst[4].CPU = 2 * truth.Expected(burst[4])
	if got := FitCost(burst); math.Abs(got.Idle-truth.Idle) > 1e-6 || (got.Per-truth.Per).Abs() > time.Nanosecond {
		t.Fatalf("FitCost with a burst = %v, want %v", got, truth)
	}
	if got := FitCost(nil); got != (Cost{}) {
		t.Fatalf("FitCost(nil) = %v", got)
	}
}

func TestNoiseAndJudgement(t *testing.T) {
	truth := Cost{Idle: 0.2, Per: 50 * time.Microsecond}
	window := func(n int64, wall time.Duration, scale float64) Rate {
		r := Rate{N: n, Wall: wall}
		r.CPU = time.Duration(float64(truth.Expected(r)) * scale)
		return r
	}
	exact := []Rate{window(1000, time.Second, 1), window(5000, time.Second, 1), window(3000, 2*time.Second, 1),
		window(12000, 2*time.Second, 1), window(8000, time.Second, 1), window(2000, 2*time.Second, 1)}
	if n := Noise(exact); n > 1e-4 {
		t.Fatalf("Noise of windows the model fits exactly = %.4f, want 0", n)
	}
	// One window spent a third more CPU than the others' model gives it,
	// one 10% less: left out, the first misses the others' fit by a
	// quarter of its CPU (the fit on five leaves the second out); the
	// others' fits bend with the outliers and may miss by more.
	jitter := slices.Clone(exact)
	jitter[1] = window(5000, time.Second, 4.0/3)
	jitter[3] = window(12000, 2*time.Second, 0.9)
	if n := Noise(jitter); n < 0.25-1e-6 || n > 0.5 {
		t.Fatalf("Noise of jittered windows = %.4f, want at least 0.25 and well below 0.5", n)
	}
	// An event window spending 1.5× what its count and length cost: a third
	// of its CPU is excess. Beyond a 20% bound on exact windows; within it
	// plus the jittered windows' noise only when the noise is wide enough.
	ev := window(4000, 1500*time.Millisecond, 1.5)
	j := Judgement{Excess: FitCost(exact).Excess(ev), Noise: Noise(exact)}
	if math.Abs(j.Excess-1.0/3) > 1e-4 || !j.Exceeds(0.2) {
		t.Fatalf("on exact windows %+v: want an excess of 1/3 that exceeds 0.2", j)
	}
	if (Judgement{Excess: 0.33, Noise: 0.25}).Exceeds(0.2) || !(Judgement{Excess: 0.46, Noise: 0.25}).Exceeds(0.2) {
		t.Fatal("Exceeds does not compare the excess with the bound plus the noise")
	}
}

func TestCPUWindowCountsThisProcess(t *testing.T) {
	var n int64
	w := StartCPU(func() int64 { return n })
	deadline := CPU() + 50*time.Millisecond
	for CPU() < deadline {
		n++
	}
	r := w.End()
	if r.CPU < 50*time.Millisecond || r.N != n || r.PerCPU() <= 0 {
		t.Fatalf("window over a 50 ms CPU burn: %v", r)
	}
}
