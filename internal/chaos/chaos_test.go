package chaos

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	seedsFlag    = flag.Int("chaos.seeds", 50, "number of seeds TestChaos runs (from -chaos.first)")
	firstFlag    = flag.Uint64("chaos.first", 1, "first seed TestChaos runs")
	seedFlag     = flag.Uint64("chaos.seed", 0, "run only this seed")
	scheduleFlag = flag.String("chaos.schedule", "", "run only the schedule in this file")
	picturesFlag = flag.String("chaos.pictures", "", "directory for the runs' pictures (default: the test's temp dir, kept on failure)")
)

// TestChaos runs the CI budget: -chaos.seeds seeds from -chaos.first, one
// line per seed with the command that replays it.
func TestChaos(t *testing.T) {
	var runs []Schedule
	switch {
	case *scheduleFlag != "":
		b, err := os.ReadFile(*scheduleFlag)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(string(b))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, s)
	case *seedFlag != 0:
		runs = append(runs, Generate(*seedFlag, GenOptions{}))
	default:
		for i := 0; i < *seedsFlag; i++ {
			runs = append(runs, Generate(*firstFlag+uint64(i), GenOptions{}))
		}
	}
	dir := *picturesFlag
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "jobraft-chaos")
	}
	start := time.Now()
	var results []Result
	for _, s := range runs {
		var res Result
		ok := t.Run(fmt.Sprintf("seed-%d", s.Seed), func(t *testing.T) {
			res = Run(t, s, Options{PictureDir: dir})
			t.Log(line(res))
			if f := res.Failed(); len(f) > 0 {
				for _, v := range f {
					t.Error(v)
				}
				t.Logf("schedule:\n%s", s)
			}
		})
		if !ok && res.Schedule.Members == 0 {
			res = Result{Schedule: s, Verdicts: []Verdict{{Checker: "harness", Detail: "the run did not complete"}}}
		}
		results = append(results, res)
		fmt.Println(line(res))
	}
	fmt.Printf("chaos: %d seeds in %s; pictures in %s\n", len(results), time.Since(start).Round(time.Second), dir)
	fmt.Print(Table(results))
}

// line is a run's one-line report.
func line(res Result) string {
	s := res.Schedule
	replay := fmt.Sprintf("go test -race -run 'TestChaos$' ./internal/chaos/ -chaos.seed=%d", s.Seed)
	word := "PASS"
	if f := res.Checkers(); len(f) > 0 {
		word = "FAIL " + strings.Join(f, ",")
	}
	pic := ""
	if res.Picture != "" {
		pic = " picture " + res.Picture
	}
	return fmt.Sprintf("chaos seed %d: %s (%d members, %d actions, %d ops, %s)%s; replay: %s", s.Seed, word, s.Members, len(s.Actions), res.Ops, res.Wall.Round(100*time.Millisecond), pic, replay)
}
