package jobraft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/internal/worker"
)

// Handler runs one job. Its context is canceled when the lease is lost
// (expired and reclaimed, or the lease could not be extended), when the job
// is canceled, and when Run's context ends. Returning nil acks the job with
// result; an error naks it (RetryAfter sets the delay, Permanent terms it).
// A panic is recovered and naked.
type Handler func(ctx context.Context, job Job) (result []byte, err error)

// WorkerConfig configures Run.
type WorkerConfig struct {
	// Worker names this worker in leases (default: the member ID).
	Worker string
	// Queues maps each queue to work on to its concurrency limit (>= 1).
	Queues map[string]int
	// Handlers maps job kinds to handlers; Default, if set, runs every
	// kind not listed. Without Default, Run claims only the kinds listed
	// (at most fsm.MaxClaimKinds): a job of another kind is never claimed
	// by this worker and waits, untouched, for a worker that handles it.
	Handlers map[string]Handler
	Default  Handler
	// LeaseTTL of claims (default Config.LeaseTTL). Leases are extended
	// every LeaseTTL/3 while the handler runs.
	LeaseTTL time.Duration
	// PollWait is the long-poll wait of each claim (default 30s). An idle
	// worker proposes nothing (see ClaimRequest.Wait), whatever PollWait.
	PollWait time.Duration
	// OnError, if set, is told about claim, extend and report failures
	// (they are retried or logged; Run continues).
	OnError func(job Job, err error)
}

// ErrLeaseLost is the cause of a handler context canceled because the job's
// lease ended (context.Cause).
var ErrLeaseLost = worker.ErrLeaseLost

// RetryAfter makes a handler's error nak the job with delay instead of its
// backoff policy.
func RetryAfter(err error, delay time.Duration) error { return worker.RetryAfter(err, delay) }

// Permanent makes a handler's error term the job (dead, no more attempts).
func Permanent(err error) error { return worker.Permanent(err) }

// Run works on jobs until ctx ends, with at most Queues[q] handlers running
// per queue q. Each job's lease is extended while its handler runs; the
// handler's context is canceled when the lease is lost or the job is
// canceled (seen as soon as this member applies the change), and then its
// result is not reported (the lease is stale). When ctx ends, Run stops
// claiming, cancels running handlers, reports what they return and
// returns nil once they are done. A paused queue is waited on, not
// reported as an error.
//
// Run first checks wc and returns an error matching ErrInvalidConfig,
// having claimed nothing, for a configuration that cannot work: no
// queues, a concurrency below 1, no handler at all, a nil handler, more
// than fsm.MaxClaimKinds kinds without Default, or a queue, worker or kind
// name or lease TTL a claim would refuse.
//
// Guarantees: a job is acked only by the holder of its current lease, so a
// handler whose lease was lost can never complete it; a job may run more
// than once (at-least-once: a lost lease, a crash, an unknown outcome), so
// handlers must be idempotent; a job is claimed only by a worker with a
// handler for its kind.
func (c *Controller) Run(ctx context.Context, wc WorkerConfig) error {
	cfg := c.workerConfig(wc)
	claims, err := worker.Plan(cfg)
	if err != nil {
		return fmt.Errorf("%w: worker: %w", ErrInvalidConfig, err)
	}
	worker.Run(ctx, c.workerMember(), &cfg, claims)
	return nil
}

// workerMember is this controller as the runner sees it.
func (c *Controller) workerMember() *worker.Member {
	return &worker.Member{
		Claim: c.workerClaim,
		Gone:  func(err error) bool { return errors.Is(err, ErrStaleLease) || errors.Is(err, ErrNotFound) },
		Rec:   c.rec, Closed: c.closed, RetryPause: c.retryPause(), ReportTimeout: c.cfg.ProposeTimeout, Log: c.log,
	}
}

// workerConfig is wc for the runner, its defaults filled: the member ID
// for a worker name, Config.LeaseTTL, a 30s poll.
func (c *Controller) workerConfig(wc WorkerConfig) worker.Config {
	cfg := worker.Config{Worker: wc.Worker, Queues: wc.Queues, Default: worker.Handler(wc.Default),
		LeaseTTL: c.cfg.leaseTTL(wc.LeaseTTL), PollWait: wc.PollWait, OnError: wc.OnError}
	if cfg.Worker == "" {
		cfg.Worker = c.cfg.ID
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = 30 * time.Second
	}
	if len(wc.Handlers) > 0 {
		cfg.Handlers = make(map[string]worker.Handler, len(wc.Handlers))
		for k, h := range wc.Handlers {
			cfg.Handlers[k] = worker.Handler(h)
		}
	}
	return cfg
}

// workerClaim is a runner's claim: a paused queue is waited on, not an
// error.
func (c *Controller) workerClaim(ctx context.Context, cl worker.Claim) ([]worker.Claimed, error) {
	leases, err := c.Claim(ctx, ClaimRequest{Queues: []string{cl.Queue}, Kinds: cl.Kinds, Worker: cl.Worker,
		Max: cl.Max, LeaseTTL: cl.LeaseTTL, Wait: cl.Wait})
	if errors.Is(err, ErrQueuePaused) {
		err = nil
	}
	out := make([]worker.Claimed, len(leases))
	for i, l := range leases {
		out[i] = worker.Claimed{Job: l.Job, Token: l.Token, Lease: l}
	}
	return out, err
}
