// Command bench compares jobraft with what a user would pick instead, in
// one run on this machine: bare hashicorp/raft + raft-boltdb/v2, NATS
// JetStream R3 work queues (embedded nats-server, fsync always), and
// jobraft (Submit without and with client IDs, full job cycles served by
// the submitter or handed to separate workers, five members too). Each
// system is three members in this process on loopback, fsync on, 256-byte
// payloads, closed-loop clients; each point runs on fresh clusters and
// reports the median of -runs. Compare ratios, not absolute figures: the
// three members share this machine's cores.
//
//	go run . -c 1,16,64,256 -d 5s -runs 3
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	var cfg config
	var cs string
	flag.StringVar(&cs, "c", "1,16,64,256", "client counts (closed loop), comma-separated")
	flag.DurationVar(&cfg.Duration, "d", 5*time.Second, "measured time per system and point")
	flag.DurationVar(&cfg.Warm, "warm", time.Second, "warm-up per system and point")
	flag.IntVar(&cfg.Runs, "runs", 1, "fresh clusters per point (the median is reported)")
	flag.IntVar(&cfg.Payload, "payload", 256, "payload bytes")
	flag.DurationVar(&cfg.Hold, "hold", 0, "jobraft's Config.BatchHold (0: its default; negative: no hold)")
	var sys, ser string
	flag.StringVar(&sys, "systems", strings.Join(systems, ","), "systems to run, comma-separated: "+strings.Join(systems, ", "))
	flag.StringVar(&ser, "series", "", "series to run, comma-separated (default: every series of -systems): "+strings.Join(seriesFiles(), ", "))
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "CPU-profile each series' measured window into <prefix>-c<C>-r<run>-<series>.pprof")
	flag.StringVar(&cfg.MemProfile, "memprofile", "", "write the allocation profile at the start and end of each series' window into <prefix>-c<C>-r<run>-<series>.{base,end}.pprof")
	flag.Parse()
	var err error
	if cfg.Series, err = selectSeries(sys, ser); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	for _, f := range strings.Split(cs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad client count %q\n", f)
			os.Exit(2)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	fmt.Printf("3 members per system (jobraft also 5) in one process on loopback, fsync on, %d B payloads, closed loop, %v per point (after %v warm-up), median of %d",
		cfg.Payload, cfg.Duration, cfg.Warm, cfg.Runs)
	if cfg.Hold != 0 {
		fmt.Printf(", jobraft BatchHold %v", cfg.Hold)
	}
	fmt.Print("\n\n")
	rows, err := run(cfg, func(s string) { fmt.Fprintln(os.Stderr, s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(table(rows))
}

// seriesFiles lists the series' -series names.
func seriesFiles() []string {
	var out []string
	for _, s := range allSeries {
		out = append(out, s.File)
	}
	return out
}

// selectSeries returns the -series names of the series to run: those
// named in ser (every series when empty) of the systems named in sys.
func selectSeries(sys, ser string) ([]string, error) {
	var syss, names []string
	for _, f := range strings.Split(sys, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(systems, f) {
			return nil, fmt.Errorf("unknown system %q (have %s)", f, strings.Join(systems, ", "))
		}
		syss = append(syss, f)
	}
	if ser != "" {
		for _, f := range strings.Split(ser, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(seriesFiles(), f) {
				return nil, fmt.Errorf("unknown series %q (have %s)", f, strings.Join(seriesFiles(), ", "))
			}
			names = append(names, f)
		}
	}
	var out []string
	for _, s := range allSeries {
		if slices.Contains(syss, s.System) && (ser == "" || slices.Contains(names, s.File)) {
			out = append(out, s.File)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no series selected")
	}
	return out, nil
}
