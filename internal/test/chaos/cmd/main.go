// Command cmd runs the chaos harness (internal/test/chaos) for any budget: it
// runs the package's TestChaos through `go test` (the member processes are
// the test binary re-executed) with the flags translated.
//
//	go run ./internal/test/chaos/cmd -seeds 1000             # seeds 1..1000
//	go run ./internal/test/chaos/cmd -seed 17                # one seed
//	go run ./internal/test/chaos/cmd -schedule FILE          # one schedule file
//	go run ./internal/test/chaos/cmd -seed 17 -shrink        # shrink a failure into testdata/
//
// It prints one line per seed, the summary table, and where the pictures
// and their index page are. The exit status is go test's.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	seeds := flag.Int("seeds", 50, "number of seeds to run, from -first")
	first := flag.Uint64("first", 1, "first seed")
	seed := flag.Uint64("seed", 0, "run only this seed")
	schedule := flag.String("schedule", "", "run only the schedule in this file")
	shrink := flag.Bool("shrink", false, "shrink failing schedules and save them under internal/test/chaos/testdata")
	race := flag.Bool("race", false, "build with the race detector")
	pictures := flag.String("pictures", "", "directory for the pictures (default: $TMPDIR/jobraft-chaos)")
	timeout := flag.String("timeout", "180m", "go test -timeout")
	flag.Parse()

	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: find the module root:", err)
		os.Exit(2)
	}
	args := []string{"test", "-v", "-count=1", "-timeout", *timeout, "-run", "TestChaos$"}
	if *race {
		args = append(args, "-race")
	}
	args = append(args, "./internal/test/chaos/", fmt.Sprintf("-chaos.seeds=%d", *seeds), fmt.Sprintf("-chaos.first=%d", *first))
	if *seed != 0 {
		args = append(args, fmt.Sprintf("-chaos.seed=%d", *seed))
	}
	if *schedule != "" {
		abs, err := filepath.Abs(*schedule)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(2)
		}
		args = append(args, "-chaos.schedule="+abs)
	}
	if *shrink {
		args = append(args, "-chaos.shrink")
	}
	if *pictures != "" {
		abs, _ := filepath.Abs(*pictures)
		args = append(args, "-chaos.pictures="+abs)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
}
