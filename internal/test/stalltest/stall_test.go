package stalltest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestHistoryBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var h history
	// On time, jitter below Grace, then a 100 ms stall [20, 120), then a
	// 30 ms one [130, 160).
	h.add(at(10), at(10))
	h.add(at(20), at(21))
	h.add(at(20), at(120))
	h.add(at(130), at(160))
	cases := []struct {
		from, to int
		want     Stall
	}{
		{0, 20, Stall{}},
		{0, 165, Stall{Total: 130 * time.Millisecond, Max: 100 * time.Millisecond, Count: 2}},
		{50, 70, Stall{Total: 20 * time.Millisecond, Max: 20 * time.Millisecond, Count: 1}},
		{110, 140, Stall{Total: 20 * time.Millisecond, Max: 10 * time.Millisecond, Count: 2}},
		// After the last wake-up at 160 the next is due at 170: a window
		// ending at 180 sees 10 ms of a stall still in progress.
		{165, 180, Stall{Total: 10 * time.Millisecond, Max: 10 * time.Millisecond, Count: 1}},
		{165, 171, Stall{}}, // overdue by less than Grace
	}
	for _, c := range cases {
		if got := h.between(at(c.from), at(c.to)); got != c.want {
			t.Errorf("between(%d, %d) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
}

func TestHistoryWorst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var h history
	// Stalls [20, 50), [60, 90), [300, 340); last wake-up at 340.
	h.add(at(20), at(50))
	h.add(at(60), at(90))
	h.add(at(300), at(340))
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		from, to, span int
		want           int
	}{
		{0, 345, 100, 60},  // [20, 120) holds both early stalls
		{0, 345, 40, 40},   // the longest stall alone
		{0, 345, 25, 25},   // a part of one
		{0, 345, 50, 40},   // [300, 340) whole, or [40, 90) = 10 + 30
		{55, 345, 100, 40}, // the window clips the first stall away
		{0, 70, 100, 40},   // and its end clips the second
		{0, 345, 1000, 100},
	}
	for _, c := range cases {
		if got := h.worst(at(c.from), at(c.to), ms(c.span)); got != ms(c.want) {
			t.Errorf("worst(%d, %d, %d) = %v, want %dms", c.from, c.to, c.span, got, c.want)
		}
	}
}

func TestHistoryBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h history
	for i := 0; i < 3*maxEvents; i++ {
		want := t0.Add(time.Duration(i) * 2 * Tick)
		h.add(want, want.Add(Tick))
	}
	if len(h.events) > maxEvents {
		t.Fatalf("%d events kept, max %d", len(h.events), maxEvents)
	}
	last := t0.Add(time.Duration(3*maxEvents-1) * 2 * Tick)
	if s := h.between(last, last.Add(Tick)); s.Total != Tick {
		t.Fatalf("the newest stall was dropped: %+v", s)
	}
}

// TestWatcherMeasuresAPausedProcess stops this very process with SIGSTOP
// for about 300 ms (a child process sends SIGCONT) and requires the watcher
// to measure the pause, and Exceeded to widen a bound by it.
func TestWatcherMeasuresAPausedProcess(t *testing.T) {
	w := Start()
	time.Sleep(5 * Tick) // let the watcher tick on time a few times
	if s := w.Stall(); s.Total > 40*time.Millisecond {
		t.Logf("machine busy before the pause: %v", s)
	}
	const pause = 300 * time.Millisecond
	cont := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", pause.Seconds(), os.Getpid()))
	if err := cont.Start(); err != nil {
		t.Fatal(err)
	}
	before := w.Stall()
	stopped := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := cont.Wait(); err != nil {
		t.Fatal(err)
	}
	paused := time.Since(stopped)
	after := w.Stall()
	got := after.Total - before.Total
	t.Logf("paused %v; %v", paused.Round(time.Millisecond), after)
	if got < pause-3*Tick {
		t.Fatalf("a pause of %v measured as a stall of %v", paused, got)
	}
	if after.Max < pause-3*Tick {
		t.Fatalf("longest stall %v, want about %v", after.Max, pause)
	}
	// A bound that has passed by the wall clock has not once the measured
	// pause is discounted (unless the two calls below are 100 ms apart).
	bound := w.Elapsed() - got + 100*time.Millisecond
	if w.Exceeded(bound) {
		t.Fatalf("Exceeded did not discount the stall: %s", w.Report(bound))
	}
}
