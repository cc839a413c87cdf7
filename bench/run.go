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

	"github.com/google/uuid"
	"github.com/jobraft/jobraft"
)

// config is one benchmark invocation.
type config struct {
	Clients  []int
	Duration time.Duration
	Warm     time.Duration
	Runs     int
	Payload  int
	Hold     time.Duration // jobraft's Config.BatchHold (0: its default)
	// Series names the series to run (allSeries' File names); empty: all.
	// A series not run reports zero and its ratios "-".
	Series []string
	// CPUProfile, when set, is a path prefix: each series' measured window
	// is CPU-profiled into <prefix>-c<C>-r<run>-<series>.pprof.
	CPUProfile string
	// MemProfile, when set, is a path prefix: the allocation profile
	// (cumulative, runtime.MemProfileRate's sampling) is written at the
	// start and the end of each series' measured window, into
	// <prefix>-c<C>-r<run>-<series>.{base,end}.pprof; `go tool pprof
	// -sample_index=alloc_space -base <base> <end>` shows the window's.
	MemProfile string
}

// runs reports whether the invocation includes series s.
func (c config) runs(s int) bool {
	return len(c.Series) == 0 || slices.Contains(c.Series, allSeries[s].File)
}

// runsSystem reports whether the invocation includes a series of sys.
func (c config) runsSystem(sys string) bool {
	for s := range allSeries {
		if allSeries[s].System == sys && c.runs(s) {
			return true
		}
	}
	return false
}

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
			got, err := runOnce(cfg, n, r, payload, func(s int, res result) {
				progress(fmt.Sprintf("c=%d run %d %-48s %9.0f/s  p50 %v  p99 %v  cpu/op %v  switches/op %.2f  failed %d", n, r, allSeries[s].Name, res.Rate,
					res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond), res.CPU.Round(100*time.Nanosecond), res.Switches, res.Errors))
			})
			if err != nil {
				return nil, fmt.Errorf("c=%d run %d: %w", n, r, err)
			}
			for s := range got {
				if got[s].Ops > 0 {
					runs[s] = append(runs[s], got[s])
				}
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

// measureFunc measures series s with operation f, if the invocation
// includes it.
type measureFunc func(s int, f op) error

// runOnce measures every series once at n clients, each system on a
// fresh cluster in a fresh directory; done receives each result.
func runOnce(cfg config, n, run int, payload []byte, done func(int, result)) ([nSeries]result, error) {
	var out [nSeries]result
	measure := func(s int, f op) error {
		if !cfg.runs(s) {
			return nil
		}
		name := func(prefix, suffix string) string {
			return fmt.Sprintf("%s-c%d-r%d-%s%s.pprof", prefix, n, run, allSeries[s].File, suffix)
		}
		var prof profiles
		if cfg.CPUProfile != "" {
			prof.CPU = name(cfg.CPUProfile, "")
		}
		if cfg.MemProfile != "" {
			prof.MemBase, prof.MemEnd = name(cfg.MemProfile, ".base"), name(cfg.MemProfile, ".end")
		}
		r, err := closedLoop(n, cfg.Warm, cfg.Duration, prof, f)
		if err != nil {
			return fmt.Errorf("%s: %w", allSeries[s].Name, err)
		}
		out[s] = r
		done(s, r)
		return nil
	}
	dir, err := os.MkdirTemp("", "jobraft-bench-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)

	if cfg.runsSystem("bare") {
		if err := runBare(dir, payload, measure); err != nil {
			return out, err
		}
	}
	if cfg.runsSystem("nats") {
		if err := runNATS(dir, payload, measure); err != nil {
			return out, err
		}
	}
	if cfg.runsSystem("jobraft") {
		if err := runJobraft(cfg, dir, 3, n, payload, measure); err != nil {
			return out, err
		}
	}
	if cfg.runsSystem("jobraft5") {
		if err := runJobraft(cfg, dir, 5, n, payload, measure); err != nil {
			return out, err
		}
	}
	return out, nil
}

// runBare measures bare raft's series on a fresh cluster in dir.
func runBare(dir string, payload []byte, measure measureFunc) error {
	var bare *bareCluster
	err := retryStart(func() error {
		addrs, err := freeAddrs(3)
		if err == nil {
			bare, err = startBare(filepath.Join(dir, "bare-"+port(addrs[0])), addrs)
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
func runNATS(dir string, payload []byte, measure measureFunc) error {
	var nc *natsCluster
	err := retryStart(func() error {
		addrs, err := freeAddrs(6)
		if err == nil {
			nc, err = startNATS(filepath.Join(dir, "nats-"+port(addrs[0])), addrs[:3], addrs[3:])
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

// port is the port of a host:port address (names a cluster's directory).
func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// runJobraft measures the series of jobraft with the given member count
// (3: every jobraft series but the five-member ones; 5: those), each on a
// fresh cluster in dir (a series starts from an empty state, whatever the
// series before it left), at n clients.
func runJobraft(cfg config, dir string, members, n int, payload []byte, measure measureFunc) error {
	// on measures series s on a fresh cluster: f makes its operation from
	// the cluster and its leader.
	on := func(s int, f func(jr *jobraftCluster, l *jobraft.Controller) error) error {
		if !cfg.runs(s) {
			return nil
		}
		var jr *jobraftCluster
		err := retryStart(func() error {
			addrs, err := freeAddrs(members)
			if err == nil {
				jr, err = startJobraft(filepath.Join(dir, fmt.Sprintf("jobraft%d-%s", members, port(addrs[0]))), addrs, cfg.Hold)
			}
			return err
		})
		if err != nil {
			return err
		}
		defer jr.close()
		return f(jr, jr.leader())
	}
	submit := func(s int) error {
		return on(s, func(jr *jobraftCluster, l *jobraft.Controller) error {
			return measure(s, func(ctx context.Context, _ int) error { return jr.submit(ctx, l, "", payload) })
		})
	}
	cycle := func(s int) error {
		return on(s, func(jr *jobraftCluster, l *jobraft.Controller) error {
			return measure(s, func(ctx context.Context, c int) error { return jr.cycle(ctx, l, fmt.Sprint("w", c), payload) })
		})
	}
	handoff := func(s int, start workers) error {
		return on(s, func(jr *jobraftCluster, l *jobraft.Controller) error {
			return jr.withWorkers(l, "handoff", n, start, func(q string) error {
				return measure(s, func(ctx context.Context, _ int) error { return jr.handoff(ctx, l, q, payload) })
			})
		})
	}
	if members == 5 {
		return errors.Join(submit(jobraft5Submit), cycle(jobraft5Cycle))
	}
	seq := make([]int, n) // client c's next sequence number (its own goroutine only)
	return errors.Join(
		submit(jobraftSubmit),
		on(jobraftSeqSubmit, func(jr *jobraftCluster, l *jobraft.Controller) error {
			return measure(jobraftSeqSubmit, func(ctx context.Context, c int) error {
				seq[c]++
				return jr.submit(ctx, l, fmt.Sprintf("client-%d-%010d", c, seq[c]), payload)
			})
		}),
		on(jobraftUUIDSubmit, func(jr *jobraftCluster, l *jobraft.Controller) error {
			return measure(jobraftUUIDSubmit, func(ctx context.Context, _ int) error {
				return jr.submit(ctx, l, uuid.NewString(), payload)
			})
		}),
		cycle(jobraftCycle),
		handoff(jobraftRunCycle, runWorkers),
		handoff(jobraftClaimCycle, claimWorkers),
	)
}

// table prints the rows: rates and latencies, the goals, the other
// ratios, CPU and context switches per operation.
func table(rows []row) string {
	var b strings.Builder
	head := func(first string) {
		fmt.Fprintf(&b, "| %s |", first)
		for _, r := range rows {
			fmt.Fprintf(&b, " C=%d |", r.C)
		}
		fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(rows)))
	}
	line := func(name string, cell func(row) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, r := range rows {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	ratio := func(a, b result) string {
		if a.Rate == 0 || b.Rate == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a.Rate/b.Rate)
	}
	head("series: rate (p50, p99)")
	for s := range allSeries {
		line(allSeries[s].Name, func(r row) string {
			x := r.R[s]
			if x.Ops == 0 {
				return "-"
			}
			return fmt.Sprintf("%s/s (%.1f, %.1f ms)", thousands(x.Rate), ms(x.P50), ms(x.P99))
		})
	}
	fmt.Fprintf(&b, "\nGoals (issue #32, stated at C=64; ratios of rates from this run; between jobraft's series also the inverse ratio of their CPU per operation):\n\n")
	head("goal")
	for _, g := range goals {
		name := fmt.Sprintf("%s ≥ %.2f×", g.Name, g.Min)
		if g.Den < 0 {
			name = fmt.Sprintf("%s ≤ %.0f ms", g.Name, g.MaxP99)
		}
		line(name, func(r row) string {
			x := r.R[g.Num]
			switch {
			case x.Ops == 0 || (g.Den >= 0 && r.R[g.Den].Ops == 0):
				return "-"
			case g.Den < 0:
				return fmt.Sprintf("%.1f ms %s", ms(x.P99), mark(ms(x.P99) <= g.MaxP99))
			}
			v := x.Rate / r.R[g.Den].Rate
			cpu := ""
			if strings.HasPrefix(allSeries[g.Num].System, "jobraft") && strings.HasPrefix(allSeries[g.Den].System, "jobraft") {
				// The same ratio in CPU per operation: steadier than
				// rates when other tenants load the machine.
				cpu = fmt.Sprintf(" (CPU %.2f×)", float64(r.R[g.Den].CPU)/float64(x.CPU))
			}
			return fmt.Sprintf("%.2f×%s %s", v, cpu, mark(v >= g.Min))
		})
	}
	fmt.Fprintf(&b, "\nOther ratios (same run):\n\n")
	head("ratio")
	for _, q := range ratios {
		line(allSeries[q[0]].Name+" / "+allSeries[q[1]].Name, func(r row) string { return ratio(r.R[q[0]], r.R[q[1]]) })
	}
	fmt.Fprintf(&b, "\nCPU per operation (process CPU time over the window per operation completed: every member and the clients) and context switches per operation (the process's threads, voluntary and involuntary):\n\n")
	head("series")
	for s := range allSeries {
		line(allSeries[s].Name, func(r row) string {
			x := r.R[s]
			if x.Ops == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f µs, %.2f", float64(x.CPU)/float64(time.Microsecond), x.Switches)
		})
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
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
