package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// minSpan is the shortest fault phase a shrink leaves: the workload needs
// time to hit a bug even when no fault is needed.
const minSpan = time.Second

// ShrinkOptions bound a shrink.
type ShrinkOptions struct {
	// Runs is the most runs the shrink may spend (default 30).
	Runs int
	// Tries is how many runs a candidate gets to fail before it is
	// judged passing (default 2): a failure may need luck with timing.
	Tries int
	// Run options of every run.
	Run Options
}

// Shrink minimizes a schedule that fails checker: it drops actions one at
// a time, then halves spans, then trims the fault phase, keeping each
// change under which a run still fails that checker. It returns the
// smallest failing schedule found and the runs it spent.
func Shrink(t *testing.T, s Schedule, checker string, o ShrinkOptions) (Schedule, int) {
	if o.Runs <= 0 {
		o.Runs = 30
	}
	if o.Tries <= 0 {
		o.Tries = 2
	}
	runs := 0
	fails := func(c Schedule) bool {
		for try := 0; try < o.Tries && runs < o.Runs; try++ {
			runs++
			var res Result
			t.Run(fmt.Sprintf("shrink-%d", runs), func(t *testing.T) { res = Run(t, c, o.Run) })
			if slices.Contains(res.Checkers(), checker) {
				return true
			}
		}
		return false
	}
	// Drop actions, last first (later faults are more often bystanders).
	for i := len(s.Actions) - 1; i >= 0 && runs < o.Runs; i-- {
		c := s
		c.Actions = slices.Delete(slices.Clone(s.Actions), i, i+1)
		if fails(c) {
			s = c
		}
	}
	// Halve spans.
	for i := range s.Actions {
		if runs >= o.Runs || s.Actions[i].For < 2*step {
			continue
		}
		c := s
		c.Actions = slices.Clone(s.Actions)
		c.Actions[i].For = (c.Actions[i].For / 2).Truncate(step)
		if fails(c) {
			s = c
		}
	}
	// Trim the fault phase to the last action's end.
	var end time.Duration
	for _, a := range s.Actions {
		end = max(end, a.End())
	}
	end = max(end+step, minSpan)
	if end < s.Span && runs < o.Runs {
		c := s
		c.Span = end
		if fails(c) {
			s = c
		}
	}
	return s, runs
}

// SaveRegression writes a shrunk schedule under dir as a regression that
// TestRegressions replays; note says what it found.
func SaveRegression(dir string, s Schedule, checker, note string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("seed-%d-%s.sched", s.Seed, checker))
	var b strings.Builder
	fmt.Fprintf(&b, "# chaos regression: seed %d failed checker %s\n", s.Seed, checker)
	for _, l := range strings.Split(strings.TrimSpace(note), "\n") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	b.WriteString(s.String())
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}
