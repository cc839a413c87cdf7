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
	failfast     = flag.Bool("chaos.failfast", false, "stop at the first failing seed")
	shrinkFlag   = flag.Bool("chaos.shrink", false, "shrink a failing schedule and save it under -chaos.save")
	saveFlag     = flag.String("chaos.save", "testdata", "directory for shrunk failing schedules (regressions TestRegressions replays)")
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
			res.Replay = replaySeed(s.Seed)
			if *scheduleFlag != "" {
				res.Replay = replayFile(*scheduleFlag)
			}
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
		if f := res.Failed(); len(f) > 0 && *shrinkFlag {
			shrinkAndSave(t, s, f[0], dir)
		}
		if len(res.Failed()) > 0 && *failfast {
			break
		}
	}
	fmt.Printf("chaos: %d seeds in %s; pictures in %s\n", len(results), time.Since(start).Round(time.Second), dir)
	fmt.Print(Table(results))
	if len(results) > 1 {
		if path, err := WriteIndex(dir, results); err == nil {
			fmt.Printf("chaos: index of the runs: %s\n", path)
		}
	}
}

// line is a run's one-line report.
func line(res Result) string {
	s := res.Schedule
	word := "PASS"
	if f := res.Checkers(); len(f) > 0 {
		word = "FAIL " + strings.Join(f, ",")
	}
	pic := ""
	if res.Picture != "" {
		pic = " picture " + res.Picture
	}
	return fmt.Sprintf("chaos seed %d: %s (%d members, %d actions, %d ops, %s)%s; replay: %s", s.Seed, word, s.Members, len(s.Actions), res.Ops, res.Wall.Round(100*time.Millisecond), pic, res.Replay)
}

func replaySeed(seed uint64) string {
	return fmt.Sprintf("go test%s -run 'TestChaos$' ./internal/test/chaos/ -chaos.seed=%d", raceFlag, seed)
}

func replayFile(path string) string {
	return fmt.Sprintf("go test%s -run 'TestChaos$' ./internal/test/chaos/ -chaos.schedule=%s", raceFlag, path)
}

// shrinkAndSave shrinks a schedule that failed v and saves it as a
// regression.
func shrinkAndSave(t *testing.T, s Schedule, v Verdict, dir string) {
	small, runs := Shrink(t, s, v.Checker, ShrinkOptions{Run: Options{PictureDir: filepath.Join(dir, "shrink"), Converge: 10 * time.Second}})
	path, err := SaveRegression(*saveFlag, small, v.Checker, v.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chaos seed %d: shrunk in %d runs from %d to %d actions, saved %s:\n%s", s.Seed, runs, len(s.Actions), len(small.Actions), path, small)
}

// TestRegressions replays every schedule saved under testdata/ (shrunk
// failures, and scenario narratives written as schedules): each must pass
// every checker.
func TestRegressions(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sched"))
	if len(files) == 0 {
		t.Skip("no schedules under testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(string(b))
			if err != nil {
				t.Fatal(err)
			}
			res := Run(t, s, Options{PictureDir: filepath.Join(os.TempDir(), "jobraft-chaos", "regressions")})
			res.Replay = replayFile(f)
			t.Log(line(res))
			for _, v := range res.Failed() {
				t.Error(v)
			}
		})
	}
}
