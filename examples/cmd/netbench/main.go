//go:build linux

// Command netbench measures jobd on separate hosts (`make netns-bench`):
// three jobd members (mTLS), each in its own network namespace with its
// own address, every link through a Toxiproxy (package netrig) at each
// round trip of -rtt, once with the default timeouts and once with the
// ones docs/timing.md recommends for that round trip (-recommended). Per
// row: the round trip measured through the proxies, Submit rate and
// latency and full cycles (submit, claim, ack) with -c closed-loop
// clients spread over the members, leader changes during that load, and
// failover — from the fault until a submit to another member succeeds —
// with the leader SIGKILLed, isolated (a full partition) and frozen
// (SIGSTOP), -n times each. Needs root (ip netns).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/examples/internal/cluster"
	"github.com/jobraft/jobraft/examples/internal/netrig"
)

// setup is one row: a round trip and the timeouts.
type setup struct {
	RTT         time.Duration
	Heartbeat   time.Duration
	Recommended bool
}

func main() {
	rtts := flag.String("rtt", "200us,2ms,20ms,50ms", "round trips between members")
	rec := flag.String("recommended", "200us=250ms,2ms=250ms,20ms=500ms,50ms=750ms", "the heartbeat = election = lease timeout docs/timing.md recommends per round trip")
	def := flag.Duration("default", 250*time.Millisecond, "the default timeouts (raft.DefaultHeartbeatTimeout)")
	clients := flag.Int("c", 16, "closed-loop clients")
	d := flag.Duration("d", 5*time.Second, "measured window of each load")
	n := flag.Int("n", 3, "failovers per kind and row")
	out := flag.String("out", "", "also write the table to this file")
	dir := flag.String("dir", "", "data and logs (default: a new temporary directory, kept)")
	flag.Parse()
	setups, err := parseSetups(*rtts, *rec, *def)
	if err == nil && (*clients < 1 || *n < 1 || *d <= 0) {
		err = fmt.Errorf("-c, -n >= 1 and -d > 0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{clients: *clients, window: *d, samples: *n}
	if err := b.prepare(ctx, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
	defer b.rig.Close()
	var rows []row
	for _, s := range setups {
		r, err := b.run(ctx, s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "netbench: %v (data and logs in %s)\n", err, b.dir)
			b.rig.Close()
			os.Exit(1)
		}
		rows = append(rows, r)
	}
	table := render(rows, *clients, *d, *n)
	fmt.Print(table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "netbench:", err)
			os.Exit(1)
		}
	}
}

// parseSetups: every round trip with the default timeouts, and again with
// its recommended ones when they differ.
func parseSetups(rtts, rec string, def time.Duration) ([]setup, error) {
	recs := map[time.Duration]time.Duration{}
	for _, kv := range strings.Split(rec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		rtt, err1 := time.ParseDuration(k)
		hb, err2 := time.ParseDuration(v)
		if !ok || err1 != nil || err2 != nil || hb <= 0 {
			return nil, fmt.Errorf("-recommended %q: want a list of rtt=timeout", kv)
		}
		recs[rtt] = hb
	}
	var out []setup
	for _, f := range strings.Split(rtts, ",") {
		rtt, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || rtt < 0 {
			return nil, fmt.Errorf("-rtt %q: want durations", f)
		}
		out = append(out, setup{RTT: rtt, Heartbeat: def})
		if hb, ok := recs[rtt]; ok && hb != def {
			out = append(out, setup{RTT: rtt, Heartbeat: hb, Recommended: true})
		}
	}
	return out, nil
}

// bench holds what every row shares: the binaries and the rig.
type bench struct {
	clients, samples int
	window           time.Duration
	dir              string
	jobd, walcmp     string
	rig              *netrig.Rig
}

func (b *bench) prepare(ctx context.Context, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "jobraft-netbench-")
		if err != nil {
			return err
		}
		dir = d
	}
	b.dir = dir
	mod, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/jobraft/jobraft/examples").Output()
	if err != nil {
		return fmt.Errorf("locate the examples module (run from inside it): %w", err)
	}
	fmt.Fprintf(os.Stderr, "netbench: building jobd, walcompare and netproxy into %s\n", dir)
	if b.jobd, b.walcmp, err = cluster.Build(ctx, strings.TrimSpace(string(mod)), dir); err != nil {
		return err
	}
	proxy, err := netrig.Build(ctx, strings.TrimSpace(string(mod)), dir)
	if err != nil {
		return err
	}
	b.rig, err = netrig.New(ctx, netrig.Options{Members: 3, Dir: dir, Proxy: proxy})
	return err
}

// run measures one row on a new cluster.
func (b *bench) run(ctx context.Context, s setup) (row, error) {
	r := row{setup: s}
	name := fmt.Sprintf("rtt-%v-hb-%v", s.RTT, s.Heartbeat)
	fmt.Fprintf(os.Stderr, "netbench: %s\n", name)
	if err := b.rig.Latency(s.RTT, s.RTT/10); err != nil {
		return r, err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	ping, err := b.rig.Ping(pctx, 0, 1, 200)
	cancel()
	if err != nil {
		return r, fmt.Errorf("%s: ping: %w", name, err)
	}
	r.PingP50, r.PingP99 = ping[len(ping)/2], ping[len(ping)*99/100]
	dir := filepath.Join(b.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	c, err := cluster.New(ctx, cluster.Options{Dir: dir, TLS: true, Placement: b.rig.Placement(), Flags: []string{
		"-heartbeat", s.Heartbeat.String(), "-election", s.Heartbeat.String(), "-workers=false",
		"-lease-ttl", "30s", "-log-level", "warn"}}, b.jobd, b.walcmp)
	if err != nil {
		return r, err
	}
	defer c.Close()
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			return r, err
		}
	}
	if _, err := c.Wait(ctx, time.Minute, nil); err != nil {
		return r, fmt.Errorf("%s: cluster did not come up: %w", name, err)
	}
	if err := b.load(ctx, c, &r); err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	for _, f := range faults {
		var got []time.Duration
		for k := range b.samples {
			d, err := failover(ctx, c, b.rig, f)
			if err != nil {
				return r, fmt.Errorf("%s: %s %d: %w", name, f.name, k+1, err)
			}
			fmt.Fprintf(os.Stderr, "netbench:   %s %d: %v\n", f.name, k+1, d.Round(time.Millisecond))
			got = append(got, d)
		}
		r.Failover = append(r.Failover, spreadOf(got))
	}
	return r, nil
}
