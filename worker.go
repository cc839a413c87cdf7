package jobraft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jobraft/jobraft/fsm"
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
var ErrLeaseLost = errors.New("jobraft: lease lost")

type retryAfter struct {
	err   error
	delay time.Duration
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

// RetryAfter makes a handler's error nak the job with delay instead of its
// backoff policy.
func RetryAfter(err error, delay time.Duration) error { return &retryAfter{err, delay} }

type permanent struct{ err error }

func (e *permanent) Error() string { return e.err.Error() }
func (e *permanent) Unwrap() error { return e.err }

// Permanent makes a handler's error term the job (dead, no more attempts).
func Permanent(err error) error { return &permanent{err} }

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
	claims, err := c.workerClaims(&wc)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, req := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runQueue(ctx, &wc, req, wc.Queues[req.Queues[0]])
		}()
	}
	wg.Wait()
	return nil
}

// workerClaims fills wc's defaults, checks it, and returns the claim of
// each queue (in queue order), Max 1 (runQueue sets it per claim).
func (c *Controller) workerClaims(wc *WorkerConfig) ([]ClaimRequest, error) {
	if wc.Worker == "" {
		wc.Worker = c.cfg.ID
	}
	wc.LeaseTTL = c.cfg.leaseTTL(wc.LeaseTTL)
	if wc.PollWait <= 0 {
		wc.PollWait = 30 * time.Second
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: worker: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if len(wc.Queues) == 0 {
		return nil, bad("no queues")
	}
	if len(wc.Handlers) == 0 && wc.Default == nil {
		return nil, bad("no handlers")
	}
	kinds := make([]string, 0, len(wc.Handlers))
	for k, h := range wc.Handlers {
		if h == nil {
			return nil, bad("nil handler for kind %q", k)
		}
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // the claim's bytes do not depend on map order
	if wc.Default != nil {
		kinds = nil // every kind
	} else if len(kinds) > fsm.MaxClaimKinds {
		return nil, bad("%d kinds without a Default handler (a claim names at most %d)", len(kinds), fsm.MaxClaimKinds)
	}
	queues := make([]string, 0, len(wc.Queues))
	for q := range wc.Queues {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	var out []ClaimRequest
	for _, q := range queues {
		if n := wc.Queues[q]; n < 1 {
			return nil, bad("queue %q: concurrency %d (at least 1)", q, n)
		}
		req := ClaimRequest{Queues: []string{q}, Kinds: kinds, Worker: wc.Worker, Max: 1, LeaseTTL: wc.LeaseTTL, Wait: wc.PollWait}
		if err := req.validate(); err != nil {
			return nil, bad("queue %q: %w", q, err)
		}
		out = append(out, req)
	}
	return out, nil
}

func (c *Controller) runQueue(ctx context.Context, wc *WorkerConfig, req ClaimRequest, n int) {
	queue := req.Queues[0]
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil && !c.isClosed() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	more:
		for free < n {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		req.Max = free
		leases, err := c.Claim(ctx, req)
		for i := len(leases); i < free; i++ {
			<-slots
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrQueuePaused) {
			c.report(wc, Job{Queue: queue}, err)
			select {
			case <-ctx.Done():
			case <-c.closed:
			case <-time.After(c.retryPause()):
			}
		}
		for _, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				c.runOne(ctx, wc, l)
			}()
		}
	}
}

func (c *Controller) report(wc *WorkerConfig, j Job, err error) {
	if wc.OnError != nil {
		wc.OnError(j, err)
		return
	}
	c.log.Warn("worker", "job", j.ID, "queue", j.Queue, "error", err)
}

func (c *Controller) runOne(ctx context.Context, wc *WorkerConfig, l *Lease) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unfence := c.rec.Fence(l.Job.ID, l.Token, func(ev Event) {
		cancel(fmt.Errorf("%w: job %s %s at index %d", ErrLeaseLost, ev.JobID, ev.Kind, ev.Index))
	})
	defer unfence()
	// A cancel (or expiry) applied between the claim and the fence above
	// is in the recorded history, not in the fence's future.
	if kind, _, ok := c.rec.LeaseEnd(l.Job.ID, l.Token); ok {
		cancel(fmt.Errorf("%w: job %s %s before its handler started", ErrLeaseLost, l.Job.ID, kind))
	}
	// Extend every TTL/3 until the handler returns.
	stop := make(chan struct{})
	extended := make(chan struct{})
	go func() {
		defer close(extended)
		t := time.NewTicker(max(wc.LeaseTTL/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-hctx.Done():
				return
			case <-t.C:
			}
			ectx, ecancel := context.WithTimeout(hctx, wc.LeaseTTL/3)
			err := l.Extend(ectx)
			ecancel()
			if errors.Is(err, ErrStaleLease) || errors.Is(err, ErrNotFound) {
				cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
				return
			}
			if err != nil && hctx.Err() == nil {
				c.report(wc, l.Job, err)
			}
		}
	}()
	h := wc.Handlers[l.Job.Kind]
	if h == nil {
		h = wc.Default
	}
	var res []byte
	var herr error
	if h == nil {
		// Unreachable through Run (it claims only its handlers' kinds);
		// a lease made by hand for another kind goes back to its queue.
		herr = RetryAfter(fmt.Errorf("no handler for kind %q on worker %s", l.Job.Kind, wc.Worker), wc.PollWait)
	} else {
		res, herr = call(hctx, h, l.Job)
	}
	close(stop)
	<-extended
	if cause := context.Cause(hctx); errors.Is(cause, ErrLeaseLost) {
		c.log.Debug("lease lost; result dropped", "job", l.Job.ID, "token", l.Token, "cause", cause)
		return
	}
	// Report with a fresh context: Run's may have ended.
	rctx, rcancel := context.WithTimeout(context.Background(), c.cfg.ProposeTimeout)
	defer rcancel()
	var err error
	var ra *retryAfter
	var pe *permanent
	switch {
	case herr == nil:
		err = l.Ack(rctx, res)
	case errors.As(herr, &pe):
		err = l.Term(rctx, herr.Error())
	case errors.As(herr, &ra):
		err = l.Nak(rctx, ra.delay, herr.Error())
	default:
		err = l.Nak(rctx, 0, herr.Error())
	}
	if err != nil && !errors.Is(err, ErrStaleLease) {
		c.report(wc, l.Job, err)
	}
}

func call(ctx context.Context, h Handler, j Job) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, j)
}
