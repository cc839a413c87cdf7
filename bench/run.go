package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// config is one benchmark invocation.
type config struct {
	Clients  []int
	Duration time.Duration
	Warm     time.Duration
	Runs     int
	Payload  int
	Hold     time.Duration // jobraft's Config.BatchHold (0: its default)
	// Systems names the systems to run ("bare", "nats", "jobraft"); empty:
	// all. A series not run reports zero and its ratios "-".
	Systems []string
	// CPUProfile, when set, is a path prefix: each series' measured window
	// is CPU-profiled into <prefix>-c<C>-r<run>-<series>.pprof.
	CPUProfile string
}

// runs reports whether the invocation includes system sys.
func (c config) runs(sys string) bool {
	return len(c.Systems) == 0 || slices.Contains(c.Systems, sys)
}

// systems are the names -systems takes.
var systems = []string{"bare", "nats", "jobraft"}

// Systems and operations measured, in table order.
const (
	bareSubmit = iota
	bareCycle
	natsSubmit
	natsCycle
	jobraftSubmit
	jobraftCycle
	nSeries
)

var seriesNames = [nSeries]string{
	"bare raft submit", "bare raft cycle", "NATS JS R3 submit", "NATS JS R3 cycle", "jobraft Submit", "jobraft cycle",
}

// seriesFiles name the series in profile file names.
var seriesFiles = [nSeries]string{"bare-submit", "bare-cycle", "nats-submit", "nats-cycle", "jobraft-submit", "jobraft-cycle"}

// row is one client count's results (the median run of each series).
type row struct {
	C int
	R [nSeries]result
}

// run measures every series at every client count, each run on fresh
// clusters; progress receives a line per measurement.
func run(cfg config, progress func(string)) ([]row, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	payload := make([]byte, cfg.Payload)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var rows []row
	for _, n := range cfg.Clients {
		var runs [nSeries][]result
		for r := 0; r < cfg.Runs; r++ {
			got, err := runOnce(cfg, n, r, payload)
			if err != nil {
				return nil, fmt.Errorf("c=%d run %d: %w", n, r, err)
			}
			for s := range got {
				if got[s].Ops == 0 {
					continue // a system not run
				}
				runs[s] = append(runs[s], got[s])
				progress(fmt.Sprintf("c=%d run %d %-18s %9.0f/s  p50 %v  p99 %v  cpu/op %v  switches/op %.2f  failed %d", n, r, seriesNames[s], got[s].Rate,
					got[s].P50.Round(10*time.Microsecond), got[s].P99.Round(10*time.Microsecond), got[s].CPU.Round(100*time.Nanosecond), got[s].Switches, got[s].Errors))
			}
		}
		rw := row{C: n}
		for s := range runs {
			if len(runs[s]) == 0 {
				continue
			}
			slices.SortFunc(runs[s], func(a, b result) int { return cmp.Compare(a.Rate, b.Rate) })
			rw.R[s] = runs[s][len(runs[s])/2]
		}
		rows = append(rows, rw)
	}
	return rows, nil
}

// runOnce measures every series once at n clients, each system on a
// fresh cluster in a fresh directory.
func runOnce(cfg config, n, run int, payload []byte) ([nSeries]result, error) {
	var out [nSeries]result
	measure := func(s int, f op) error {
		prof := ""
		if cfg.CPUProfile != "" {
			prof = fmt.Sprintf("%s-c%d-r%d-%s.pprof", cfg.CPUProfile, n, run, seriesFiles[s])
		}
		r, err := closedLoop(n, cfg.Warm, cfg.Duration, prof, f)
		if err != nil {
			return fmt.Errorf("%s: %w", seriesNames[s], err)
		}
		out[s] = r
		return nil
	}
	dir, err := os.MkdirTemp("", "jobraft-bench-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)

	if cfg.runs("bare") {
		if err := runBare(cfg, dir, payload, measure); err != nil {
			return out, err
		}
	}
	if cfg.runs("nats") {
		if err := runNATS(dir, payload, measure); err != nil {
			return out, err
		}
	}
	if cfg.runs("jobraft") {
		if err := runJobraft(cfg, dir, payload, measure); err != nil {
			return out, err
		}
	}
	return out, nil
}

// runBare measures bare raft's series on a fresh cluster in dir.
func runBare(_ config, dir string, payload []byte, measure func(int, op) error) error {
	var bare *bareCluster
	err := retryStart(func() error {
		addrs, err := freeAddrs(3)
		if err == nil {
			bare, err = startBare(filepath.Join(dir, "bare-"+addrs[0][strings.LastIndex(addrs[0], ":")+1:]), addrs)
		}
		return err
	})
	if err != nil {
		return err
	}
	err = errors.Join(
		measure(bareSubmit, func(_ context.Context, c int) error {
			return bare.submit(fmt.Sprint(c, "-", time.Now().UnixNano()), payload)
		}),
		measure(bareCycle, func(ctx context.Context, c int) error {
			return bare.cycle(ctx, fmt.Sprint(c, "-", time.Now().UnixNano()), payload)
		}),
	)
	bare.close()
	return err
}

// runNATS measures NATS JetStream's series on a fresh cluster in dir.
func runNATS(dir string, payload []byte, measure func(int, op) error) error {
	var nc *natsCluster
	err := retryStart(func() error {
		addrs, err := freeAddrs(6)
		if err == nil {
			nc, err = startNATS(filepath.Join(dir, "nats-"+addrs[0][strings.LastIndex(addrs[0], ":")+1:]), addrs[:3], addrs[3:])
		}
		return err
	})
	if err != nil {
		return err
	}
	err = errors.Join(
		measure(natsSubmit, func(ctx context.Context, c int) error { return nc.submit(ctx, c, payload) }),
		measure(natsCycle, func(ctx context.Context, c int) error { return nc.cycle(ctx, c, payload) }),
	)
	nc.close()
	return err
}

// runJobraft measures jobraft's series on a fresh cluster in dir.
func runJobraft(cfg config, dir string, payload []byte, measure func(int, op) error) error {
	var jr *jobraftCluster
	err := retryStart(func() error {
		addrs, err := freeAddrs(3)
		if err == nil {
			jr, err = startJobraft(filepath.Join(dir, "jobraft-"+addrs[0][strings.LastIndex(addrs[0], ":")+1:]), addrs, cfg.Hold)
		}
		return err
	})
	if err != nil {
		return err
	}
	l := jr.leader()
	err = errors.Join(
		measure(jobraftSubmit, func(ctx context.Context, _ int) error { return jr.submit(ctx, l, payload) }),
		measure(jobraftCycle, func(ctx context.Context, c int) error { return jr.cycle(ctx, l, fmt.Sprint("w", c), payload) }),
	)
	jr.close()
	return err
}

// table prints the rows and the ratios.
func table(rows []row) string {
	var b strings.Builder
	rate := func(r result) string {
		if r.Ops == 0 {
			return "-"
		}
		return fmt.Sprintf("%s/s", thousands(r.Rate))
	}
	withP99 := func(r result) string {
		if r.Ops == 0 {
			return "-"
		}
		return fmt.Sprintf("%s/s (p99 %.1f ms)", thousands(r.Rate), float64(r.P99)/float64(time.Millisecond))
	}
	ratio := func(a, b result) string {
		if a.Rate == 0 || b.Rate == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a.Rate/b.Rate)
	}
	fmt.Fprintf(&b, "| C | bare raft + raft-boltdb/v2 submit | bare raft cycle (3 entries) | NATS JetStream R3 submit | NATS JetStream R3 cycle | jobraft Submit | jobraft cycle (submit, claim, ack) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", r.C, rate(r.R[bareSubmit]), rate(r.R[bareCycle]),
			withP99(r.R[natsSubmit]), withP99(r.R[natsCycle]), withP99(r.R[jobraftSubmit]), withP99(r.R[jobraftCycle]))
	}
	fmt.Fprintf(&b, "\nRatios (jobraft / other, same run):\n\n")
	fmt.Fprintf(&b, "| C | Submit / NATS submit | Submit / bare submit | cycle / NATS cycle | cycle / bare cycle | cycle / bare submit |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", r.C, ratio(r.R[jobraftSubmit], r.R[natsSubmit]), ratio(r.R[jobraftSubmit], r.R[bareSubmit]),
			ratio(r.R[jobraftCycle], r.R[natsCycle]), ratio(r.R[jobraftCycle], r.R[bareCycle]), ratio(r.R[jobraftCycle], r.R[bareSubmit]))
	}
	fmt.Fprintf(&b, "\nCPU per operation (process CPU seconds per 1000 operations, all three members and the clients):\n\n")
	fmt.Fprintf(&b, "| C | bare submit | bare cycle | NATS submit | NATS cycle | jobraft Submit | jobraft cycle | Submit CPU / NATS submit CPU | cycle CPU / bare cycle CPU |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	cpu := func(r result) string {
		if r.Ops == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f s", r.CPU.Seconds()*1000)
	}
	cpuRatio := func(a, b result) string {
		if a.CPU == 0 || b.CPU == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", float64(a.CPU)/float64(b.CPU))
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.C, cpu(r.R[bareSubmit]), cpu(r.R[bareCycle]), cpu(r.R[natsSubmit]),
			cpu(r.R[natsCycle]), cpu(r.R[jobraftSubmit]), cpu(r.R[jobraftCycle]), cpuRatio(r.R[jobraftSubmit], r.R[natsSubmit]), cpuRatio(r.R[jobraftCycle], r.R[bareCycle]))
	}
	fmt.Fprintf(&b, "\nContext switches per operation (the process's threads, voluntary and involuntary):\n\n")
	fmt.Fprintf(&b, "| C | bare submit | bare cycle | NATS submit | NATS cycle | jobraft Submit | jobraft cycle |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
	sw := func(r result) string {
		if r.Ops == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", r.Switches)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", r.C, sw(r.R[bareSubmit]), sw(r.R[bareCycle]), sw(r.R[natsSubmit]),
			sw(r.R[natsCycle]), sw(r.R[jobraftSubmit]), sw(r.R[jobraftCycle]))
	}
	return b.String()
}

// thousands formats a rate with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// retryStart starts a cluster, up to three times: the loopback ports
// freeAddrs found free can be taken by another process before the cluster
// binds them.
func retryStart(start func() error) error {
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		err := start()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// freeAddrs returns n loopback addresses free at the time of the call.
func freeAddrs(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// waitUntil polls cond every 20 ms until it holds or d passed.
func waitUntil(d time.Duration, cond func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		<-tick.C
	}
	return nil
}
