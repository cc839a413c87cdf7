package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// config is one demo run.
type config struct {
	Jobs      int
	Clients   int
	Batch     int
	TLS       bool
	Kill      bool          // SIGKILL the leader midway and restart it
	Grow      bool          // grow the cluster to 5 members while it works, then shrink it back (grow.go)
	Timeout   time.Duration // for the whole run
	Dir       string        // data and logs (kept)
	ModuleDir string        // the examples module (to build jobd)
	Progress  io.Writer     // progress bar; nil: none
	TTY       bool          // Progress is a terminal: redraw one line
	LeaseTTL  time.Duration
	Heartbeat time.Duration // raft heartbeat and election timeouts (0: 500ms)
	// Placement puts the members elsewhere than on loopback (the netns
	// rig); nil: loopback.
	Placement cluster.Placement
	// Faults, when set, runs from the start of the submits on (instead of
	// the leader kill) and returns the ID of a member it SIGKILLed last,
	// or "" (faults.go).
	Faults func(ctx context.Context, c *cluster.Cluster) (killed string, err error)
	// Pace is how long each client waits between its batches (so the
	// submits last through Faults).
	Pace time.Duration
}

const queue = "demo"

func jobID(i int) string { return fmt.Sprintf("demo-%06d", i) }

func payload(i int) string { return fmt.Sprintf("demo job %d", i) }

// run is the demo: it returns the summary with every check; err is set when
// the run could not complete (the summary then holds what was measured).
func run(ctx context.Context, cfg config) (*summary, error) {
	sum := &summary{Dir: cfg.Dir, Jobs: cfg.Jobs, TLS: cfg.TLS}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	progress(cfg, "building jobd and walcompare ...\n")
	jobd, walcmp, err := cluster.Build(ctx, cfg.ModuleDir, cfg.Dir)
	if err != nil {
		return sum, err
	}
	spares := 0
	if cfg.Grow {
		spares = 2
	}
	hb := cmp.Or(cfg.Heartbeat, 500*time.Millisecond).String()
	c, err := cluster.New(ctx, cluster.Options{Dir: cfg.Dir, TLS: cfg.TLS, Spares: spares, Placement: cfg.Placement, Flags: []string{
		"-heartbeat", hb, "-election", hb, "-lease-ttl", cfg.LeaseTTL.String(),
		"-queues", queue + "=16", "-log-level", "info",
	}}, jobd, walcmp)
	if err != nil {
		return sum, err
	}
	defer c.Close() // on every path: no member outlives the demo
	sum.c = c
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			return sum, err
		}
	}
	if _, err := c.Wait(ctx, 30*time.Second, nil); err != nil {
		return sum, fmt.Errorf("cluster did not come up: %w", err)
	}
	where := "on loopback"
	if cfg.Placement != nil {
		where = "in network namespaces"
	}
	progress(cfg, "cluster up: %d members %s (member mTLS: %v)\n", len(c.Members), where, cfg.TLS)
	progress(cfg, "web console (while the demo runs): http://%s/console/ (log in with the token in %s)\n",
		c.Members[0].HTTPAddr, filepath.Join(cfg.Dir, "token"))

	start := time.Now()
	half := make(chan struct{})
	var submitted atomic.Int64
	var dups atomic.Int64
	var failover *failoverResult
	var failErr error
	var wg sync.WaitGroup
	if cfg.Kill {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-half:
			case <-ctx.Done():
				return
			}
			failover, failErr = killLeader(ctx, c)
		}()
	}
	var faultKilled string
	if cfg.Faults != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			faultKilled, failErr = cfg.Faults(ctx, c)
		}()
	}
	var grown *growResult
	var growErr error
	if cfg.Grow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grown, growErr = growShrink(ctx, cfg, c)
		}()
	}
	stopBar := startBar(ctx, cfg, c, &submitted)
	err = submitAll(ctx, cfg, c, &submitted, &dups, half)
	sum.SubmitDur = time.Since(start)
	sum.Duplicates = int(dups.Load())
	if err != nil {
		stopBar()
		return sum, fmt.Errorf("submit: %w", err)
	}
	wg.Wait()
	if failErr != nil {
		stopBar()
		return sum, fmt.Errorf("failover or faults: %w", failErr)
	}
	sum.Failover = failover
	if cfg.Grow {
		if grown == nil {
			grown = &growResult{}
		}
		var ids []string
		for _, p := range grown.Promoted {
			ids = append(ids, fmt.Sprintf("%s after %s (peak %.1f MB/s)", p.ID, p.Took.Round(time.Millisecond), p.PeakBytes/1e6))
		}
		detail := "promoted " + strings.Join(ids, ", ") + "; removed " + strings.Join(grown.Removed, ", ")
		if growErr != nil {
			detail += "; " + growErr.Error()
		}
		sum.check("grow 3→5 while working (POST /v1/cluster/members, promoted by the catch-up policy), shrink back (DELETE)",
			growErr == nil && len(grown.Promoted) == spares && len(grown.Removed) == spares, detail)
	}
	if err := waitDone(ctx, c, cfg.Jobs); err != nil {
		stopBar()
		return sum, err
	}
	sum.TotalDur = time.Since(start)
	stopBar()

	conv, err := c.Wait(ctx, 60*time.Second, cluster.SameState)
	if err != nil {
		return sum, fmt.Errorf("convergence: %w", err)
	}
	sum.Members = conv
	sum.check("converged", true, fmt.Sprintf("all %d members applied index %d with digest %s", len(conv), conv[0].AppliedIndex, short(conv[0].Digest)))

	if err := verifyResults(ctx, cfg, c, sum); err != nil {
		return sum, err
	}
	killed := c.Index(faultKilled)
	if failover != nil {
		killed = c.Index(failover.Killed)
	}
	if err := verifyAcks(ctx, cfg, c, killed, sum); err != nil {
		return sum, err
	}
	// Online walcompare through the API: live members over their mTLS RPC
	// channel, by range digests, without stopping anyone.
	octx, ocancel := context.WithTimeout(ctx, time.Minute)
	online, err := c.Members[0].Client.WalCompare(octx, 0, 0)
	ocancel()
	onlineDetail := fmt.Sprintf("mode %s, indexes %d..%d, committed boundary %d, %d committed divergences, %d RPCs",
		online.Mode, online.From, online.To, online.Committed, online.CommittedCount, online.Calls)
	if err != nil {
		onlineDetail = "request failed: " + err.Error()
	}
	sum.check("online walcompare (GET /v1/cluster/walcompare): committed divergences = 0", err == nil && online.CommittedCount == 0, onlineDetail)
	checkBackup(ctx, cfg, c, conv, sum)

	// Stop gracefully, then compare the logs on disk.
	var stopErrs []string
	for i := range c.Members {
		if err := c.Stop(i, 30*time.Second); err != nil {
			stopErrs = append(stopErrs, err.Error())
		}
	}
	detail := "all members"
	if len(stopErrs) > 0 {
		detail = strings.Join(stopErrs, "; ")
	}
	sum.check("graceful stop (SIGTERM, exit 0)", len(stopErrs) == 0, detail)
	return sum, compareLogs(ctx, c, sum)
}

func progress(cfg config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format, args...)
	}
}

// submitAll submits cfg.Jobs jobs in batches from cfg.Clients concurrent
// clients, each spreading its batches over the members and retrying a batch
// (same job IDs: idempotent) on another member when one fails or is down.
func submitAll(ctx context.Context, cfg config, c *cluster.Cluster, submitted, dups *atomic.Int64, half chan struct{}) error {
	batches := make(chan []client.SubmitRequest)
	go func() {
		defer close(batches)
		for i := 0; i < cfg.Jobs; i += cfg.Batch {
			var b []client.SubmitRequest
			for j := i; j < min(i+cfg.Batch, cfg.Jobs); j++ {
				b = append(b, client.SubmitRequest{ID: jobID(j), Queue: queue, Kind: "sha256", Payload: []byte(payload(j))})
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	errs := make(chan error, cfg.Clients)
	var wg sync.WaitGroup
	for k := 0; k < cfg.Clients; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Client()
			for b := range batches {
				if err := submitBatch(ctx, cl, b, dups); err != nil {
					errs <- err
					return
				}
				if submitted.Add(int64(len(b))) >= int64(cfg.Jobs/2) {
					once.Do(func() { close(half) })
				}
				if cfg.Pace > 0 {
					select {
					case <-time.After(cfg.Pace):
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs, ctx.Err())
}

// submitBatch submits b through the public client, which fails over
// between members and resubmits (same job IDs: exactly-once) every job
// not submitted or whose outcome was unknown; while no member can take it
// (the leader was just killed), it tries again.
func submitBatch(ctx context.Context, cl *client.Client, b []client.SubmitRequest, dups *atomic.Int64) error {
	pause := time.NewTicker(100 * time.Millisecond) // retry pacing only
	defer pause.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := cl.SubmitBatch(rctx, b)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrOutcomeUnknown):
			<-pause.C // no member could take it yet (or the attempt timed out): again, same IDs
			continue
		case err != nil:
			return err // a 4xx: the demo's own request is wrong
		}
		for i, r := range res {
			switch {
			case r.Error != "":
				return fmt.Errorf("job %s refused: %s: %s", b[i].ID, r.Error, r.Reason)
			case r.Duplicate:
				dups.Add(1)
			}
		}
		return nil
	}
}

// waitDone polls the job counts until every job succeeded.
func waitDone(ctx context.Context, c *cluster.Cluster, jobs int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, m := range c.Members {
			if !c.Running(i) {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			counts, err := m.Counts(qctx, queue)
			cancel()
			if err != nil {
				continue
			}
			if counts["dead"] > 0 || counts["canceled"] > 0 {
				return fmt.Errorf("jobs failed: %v", counts)
			}
			if counts["succeeded"] >= jobs {
				return nil
			}
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for every job to complete: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// startBar draws a progress bar until the returned stop is called.
func startBar(ctx context.Context, cfg config, c *cluster.Cluster, submitted *atomic.Int64) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		completed, n := 0, 0
		for {
			for i, m := range c.Members {
				if !c.Running(i) {
					continue
				}
				qctx, cancel := context.WithTimeout(ctx, time.Second)
				counts, err := m.Counts(qctx, queue)
				cancel()
				if err == nil {
					completed = counts["succeeded"]
					break
				}
			}
			n++
			if cfg.TTY || n%8 == 1 {
				lead, end := "\r", ""
				if !cfg.TTY {
					lead, end = "", "\n" // a log, not a terminal: one line every 2s
				}
				fmt.Fprintf(cfg.Progress, "%s  submitted %s %6d/%d   completed %s %6d/%d %s", lead,
					bar(int(submitted.Load()), cfg.Jobs), submitted.Load(), cfg.Jobs, bar(completed, cfg.Jobs), completed, cfg.Jobs, end)
			}
			select {
			case <-done:
				fmt.Fprintln(cfg.Progress)
				return
			case <-ctx.Done():
				fmt.Fprintln(cfg.Progress)
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

func bar(n, total int) string {
	const w = 20
	f := 0
	if total > 0 {
		f = min(w, n*w/total)
	}
	return "[" + strings.Repeat("#", f) + strings.Repeat(".", w-f) + "]"
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
