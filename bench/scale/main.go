// Command scale measures how jobraft's cost grows with the work: a
// backlog of 0, 1M, 3M and 10M pending jobs (256 B payloads, priorities
// 0..3 in turn, every tenth delayed two days), each in a fresh 3-member
// cluster in this process on loopback (real files, fsync on, defaults but
// an unthrottled catch-up stream), preloaded through the real path
// (SubmitBatch through raft); then, on the loaded cluster: Submit and full
// cycles (submit, claim, ack) at C=64 on the backlog's queue, claim
// latency, a member's heap after GC per job, a snapshot, a member's
// restart, a backup and its restore, the disk's sequential write rate,
// and a fourth member's promotion while clients submit at half the Submit
// rate. Then cycles with 10,000 queues and with 100 kinds. Each figure is
// printed next to the empty backlog's of the same run, and a plot of the
// rates and p99s against the backlog is written as a PNG.
//
//	go run . -sizes 0,1e6,3e6,1e7 -plot ../../docs/bench-scale.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	cfg := config{}
	var sizes, plotPath string
	flag.StringVar(&sizes, "sizes", "0,1e6,3e6,1e7", "backlog sizes (pending jobs), comma-separated; 0 is the baseline and always runs")
	flag.IntVar(&cfg.Clients, "c", 64, "closed-loop clients")
	flag.DurationVar(&cfg.D, "d", 5*time.Second, "measured time of each rate")
	flag.DurationVar(&cfg.Warm, "warm", time.Second, "warm-up before each rate")
	flag.IntVar(&cfg.Payload, "payload", 256, "payload bytes")
	flag.IntVar(&cfg.Queues, "queues", 10000, "queues of the many-queues scenario (0: skip it and many kinds)")
	flag.IntVar(&cfg.PerQueue, "per-queue", 3, "jobs in each of them")
	flag.IntVar(&cfg.Kinds, "kinds", 100, "kinds of the many-kinds scenario")
	flag.IntVar(&cfg.PerKind, "per-kind", 100, "jobs of each kind")
	flag.StringVar(&cfg.Dir, "dir", os.TempDir(), "directory for the clusters' data (each removed after its size)")
	flag.StringVar(&cfg.Profile, "profile", "", "directory: a CPU profile of every phase (<size>-<phase>.pprof) and a heap profile per size")
	flag.StringVar(&plotPath, "plot", "", "write the plot (PNG) here")
	var jsonPath, replot string
	flag.StringVar(&jsonPath, "json", "", "write the figures (JSON) here")
	flag.StringVar(&replot, "replot", "", "only draw -plot from the figures in this JSON file (from -json) and print their table")
	flag.IntVar(&cfg.Members, "members", 3, "cluster size: 3, or 1 (one member's figures, for a backlog whose three states do not fit in memory)")
	flag.IntVar(&cfg.NoProgressRounds, "no-progress-rounds", 0, "the catch-up policy's NoProgressRounds (0: its default, 20 election timeouts)")
	flag.Parse()
	var err error
	if cfg.Members != 1 && cfg.Members != 3 {
		fmt.Fprintln(os.Stderr, "scale: -members is 3 or 1")
		os.Exit(2)
	}
	if cfg.Sizes, err = parseSizes(sizes); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if replot != "" {
		if err := redraw(replot, plotPath); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.Profile != "" {
		if err := os.MkdirAll(cfg.Profile, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
	}
	// The members' states share this process: keep the heap within the
	// memory the machine has free rather than twice the live heap.
	if os.Getenv("GOMEMLIMIT") == "" {
		if avail := memAvailable(); avail > 0 {
			debug.SetMemoryLimit(int64(avail / 10 * 9))
		}
	}
	fmt.Printf("%d member(s) in one process on loopback, fsync on, %d B payloads, C=%d, %v per rate after %v warm-up; load at start: %s\n\n",
		cfg.Members, cfg.Payload, cfg.Clients, cfg.D, cfg.Warm, loadAverage())
	rep, err := run(cfg, func(s string) { fmt.Fprintln(os.Stderr, s) })
	fmt.Print(rep.table())
	fmt.Printf("\nload at the end: %s\n", loadAverage())
	if jsonPath != "" {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(jsonPath, b, 0o644)
		}
		if jerr != nil {
			fmt.Fprintln(os.Stderr, "scale: json:", jerr)
			os.Exit(1)
		}
	}
	if plotPath != "" && len(rep.Sizes) > 0 {
		if perr := writePlot(plotPath, rep.members(), rep.Sizes); perr != nil {
			fmt.Fprintln(os.Stderr, "scale: plot:", perr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// report is what one run measured.
type report struct {
	// Members is the cluster's size (0 in a file written before it was
	// recorded: 3).
	Members int
	Sizes   []sizeResult
	Skipped []int // sizes that would not fit in memory
	// Again is the empty backlog's rates measured once more at the end.
	Again  *sizeResult
	Fanout *fanoutResult
}

// run measures every size in order (the baseline first), then the fanout
// scenarios; on an error it returns what was measured so far.
func run(cfg config, progress func(string)) (report, error) {
	rep := report{Members: cfg.Members}
	r := &runner{cfg: cfg, payload: make([]byte, cfg.Payload), progress: progress}
	for i := range r.payload {
		r.payload[i] = byte('a' + i%26)
	}
	var perJob float64 // a member's heap per job at the last size
	for _, n := range cfg.Sizes {
		// The members' states and a tenth more each must fit in the memory
		// available, less 2 GiB for the machine's other tenants (the
		// backup and the new member check for their own). The last
		// size's heap goes back to the system first.
		debug.FreeOSMemory()
		if need, avail := uint64(1.1*float64(cfg.Members)*perJob*float64(n)), memAvailable(); perJob > 0 && avail > 0 && need > avail-min(avail, 2<<30) {
			progress(fmt.Sprintf("[%s] skipped: needs about %s MB (%.0f B per job measured at the last size), %s MB available", sizeName(n), mb(float64(need)), perJob, mb(float64(avail))))
			rep.Skipped = append(rep.Skipped, n)
			continue
		}
		t0 := time.Now()
		res, err := r.measure(n)
		if err != nil {
			return rep, fmt.Errorf("size %s: %w", sizeName(n), err)
		}
		progress(fmt.Sprintf("[%s] done in %v (load %s)", sizeName(n), secs(time.Since(t0)), loadAverage()))
		rep.Sizes = append(rep.Sizes, res)
		if res.Jobs > 0 {
			perJob = float64(res.MemberHeap) / float64(res.Jobs)
		}
	}
	if len(rep.Sizes) > 1 {
		again, err := r.again()
		if err != nil {
			return rep, fmt.Errorf("the empty backlog again: %w", err)
		}
		rep.Again = &again
	}
	if cfg.Queues > 0 {
		f, err := r.fanout()
		if err != nil {
			return rep, fmt.Errorf("fanout: %w", err)
		}
		rep.Fanout = &f
	}
	return rep, nil
}

// parseSizes parses "0,1e6,3e6": the baseline 0 is put first whether
// named or not.
func parseSizes(s string) ([]int, error) {
	out := []int{0}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v > 1e9 || v != float64(int(v)) {
			return nil, fmt.Errorf("bad size %q", f)
		}
		if v > 0 {
			out = append(out, int(v))
		}
	}
	return out, nil
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// redraw prints the table of the figures in the JSON file path and, with
// plotPath set, draws their plot.
func redraw(path, plotPath string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Print(rep.table())
	if plotPath == "" || len(rep.Sizes) == 0 {
		return nil
	}
	return writePlot(plotPath, rep.members(), rep.Sizes)
}

// members is the cluster size the figures were measured with.
func (rep report) members() int {
	if rep.Members == 0 {
		return 3
	}
	return rep.Members
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
