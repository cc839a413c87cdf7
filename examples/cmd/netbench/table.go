//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// row is one setup's figures.
type row struct {
	setup
	PingP50, PingP99 time.Duration
	Submit, Cycle    rate
	Changes          uint64   // leader term changes during the two loads
	Failover         []spread // per fault, in faults' order
}

// load measures Submit and full cycles with b.clients closed-loop clients,
// client k talking to member k mod 3 (a follower forwards to the leader
// through the proxies; this process reaches every member directly).
func (b *bench) load(ctx context.Context, c *cluster.Cluster, r *row) error {
	_, before, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	payload := make([]byte, 256)
	member := func(k int) *client.Client { return c.Members[k%len(c.Members)].Client }
	r.Submit = closedLoop(ctx, b.clients, time.Second, b.window, func(ctx context.Context, k int) error {
		_, err := member(k).Submit(ctx, client.SubmitRequest{ID: client.NewID(), Queue: "submit", Kind: "k", Payload: payload})
		return err
	})
	r.Cycle = closedLoop(ctx, b.clients, time.Second, b.window, func(ctx context.Context, k int) error {
		cl := member(k)
		if _, err := cl.Submit(ctx, client.SubmitRequest{ID: client.NewID(), Queue: "cycle", Kind: "k", Payload: payload}); err != nil {
			return err
		}
		ls, err := cl.Claim(ctx, client.ClaimRequest{Queues: []string{"cycle"}, Worker: fmt.Sprint("w", k), Max: 1, Wait: client.Duration(5 * time.Second)})
		if err != nil {
			return err
		}
		if len(ls) == 0 {
			return fmt.Errorf("claim: nothing within 5s")
		}
		return cl.Ack(ctx, ls[0].Job.ID, ls[0].Token, nil)
	})
	_, after, err := c.Leader(ctx)
	r.Changes = after - before
	fmt.Fprintf(os.Stderr, "netbench:   submit %.0f/s p99 %v, cycle %.0f/s p99 %v, %d leader changes\n",
		r.Submit.PerSec, r.Submit.P99.Round(time.Microsecond), r.Cycle.PerSec, r.Cycle.P99.Round(time.Microsecond), r.Changes)
	return err
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f", float64(d)/1e6)
}

// failed notes the operations that failed within the window.
func failed(r rate) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d failed)", r.Errors)
}

// render is the markdown table.
func render(rows []row, clients int, d time.Duration, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| round trip set | measured p50 / p99 (ms) | heartbeat = election = lease | Submit/s (C=%d) | Submit p50 / p99 (ms) | cycles/s (C=%d) | cycle p50 / p99 (ms) | leader changes under load | failover, leader killed: median (min–max) ms | leader partitioned | leader frozen |\n", clients, clients)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		hb := r.Heartbeat.String() + " (default)"
		if r.Recommended {
			hb = "**" + r.Heartbeat.String() + "** (recommended)"
		}
		fmt.Fprintf(&b, "| %v | %s / %s | %s | %.0f%s | %s / %s | %.0f%s | %s / %s | %d |", r.RTT, ms(r.PingP50), ms(r.PingP99), hb,
			r.Submit.PerSec, failed(r.Submit), ms(r.Submit.P50), ms(r.Submit.P99), r.Cycle.PerSec, failed(r.Cycle), ms(r.Cycle.P50), ms(r.Cycle.P99), r.Changes)
		for _, f := range r.Failover {
			fmt.Fprintf(&b, " %s (%s–%s) |", ms(f.Med), ms(f.Min), ms(f.Max))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d s per load after 1 s of warm-up, %d failovers per kind and row.\n", int(d.Seconds()), n)
	return b.String()
}
