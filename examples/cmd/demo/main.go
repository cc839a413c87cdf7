// Command demo runs jobraft end to end on this machine (`make demo`): it
// builds jobd and walcompare, starts a 3-member cluster on loopback with
// mTLS between members, submits jobs from concurrent clients, SIGKILLs the
// leader midway and restarts it, waits for convergence through the status
// API, and verifies: every job completed exactly once, every member at the
// same applied index and state digest, and walcompare over the three data
// dirs with zero committed divergences. It exits 0 only if every check
// holds, and always stops the members it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg := config{Progress: os.Stderr}
	flag.IntVar(&cfg.Jobs, "jobs", 3000, "jobs to submit")
	flag.IntVar(&cfg.Clients, "clients", 8, "concurrent submitting clients")
	flag.IntVar(&cfg.Batch, "batch", 20, "jobs per submit request")
	flag.BoolVar(&cfg.TLS, "tls", true, "mTLS between members (throwaway certificates)")
	flag.BoolVar(&cfg.Kill, "kill", true, "SIGKILL the leader midway and restart it")
	flag.BoolVar(&cfg.Grow, "grow", false, "grow the cluster to 5 members while it works (jobd -join, POST /v1/cluster/members), then shrink it back; with -kill=false")
	flag.DurationVar(&cfg.LeaseTTL, "lease-ttl", 3*time.Second, "job lease TTL (jobs running on the killed leader come back after it)")
	flag.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound on the whole run")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for data and logs (default: a new temporary directory, kept)")
	flag.Parse()
	if cfg.Grow && cfg.Kill {
		fmt.Fprintln(os.Stderr, "demo: -grow needs -kill=false (a promoted spare could be the leader killed)")
		os.Exit(2)
	}
	if cfg.Jobs < 1 || cfg.Clients < 1 || cfg.Batch < 1 || cfg.Batch > 1000 {
		fmt.Fprintln(os.Stderr, "demo: -jobs, -clients >= 1 and -batch in 1..1000")
		os.Exit(2)
	}
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		cfg.TTY = true
	}
	if err := prepare(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "jobraft demo: %d jobs, %d clients, data and logs in %s\n", cfg.Jobs, cfg.Clients, cfg.Dir)
	// ^C or SIGTERM cancels the run; run's deferred cleanup kills the members.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, cfg)
	sum.print(os.Stdout, err)
	if err != nil || !sum.OK() {
		os.Exit(1)
	}
}

// prepare fills the data dir and the examples module's directory.
func prepare(cfg *config) error {
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "jobraft-demo-")
		if err != nil {
			return err
		}
		cfg.Dir = d
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/jobraft/jobraft/examples").Output()
	if err != nil {
		return fmt.Errorf("locate the examples module (run from inside it): %w", err)
	}
	cfg.ModuleDir = strings.TrimSpace(string(out))
	return nil
}
