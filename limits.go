package jobraft

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Cluster-wide limits (fsm/limit.go): a queue's concurrency limit (at
// most Max of its jobs running at once), a kind's within a queue, and a
// queue's rate (a token bucket on the log's time). They live in the
// replicated state and are enforced when a claim is applied, so they hold
// across every member and worker, through leader changes, and while a
// lease that passed its deadline waits for the leader's expiry (it counts
// until then). A Claim of a queue at its limit leases nothing from it;
// one that waits (ClaimRequest.Wait) notices a freed slot or a new token
// within Config.ClaimPollInterval.

// QueueLimits is one queue's limits, running counts, bucket and the
// claims its limits held back (see fsm.QueueLimits).
type QueueLimits = fsm.QueueLimits

// UniqueOpts makes a submitted job unique by (queue, kind, payload)
// within a period and among states (see fsm.UniqueOpts and
// SubmitRequest.Unique).
type UniqueOpts = fsm.UniqueOpts

// StateSet is a set of job states (UniqueOpts.States).
type StateSet = fsm.StateSet

// RateLimit is a queue's rate: PerSecond jobs per second on average
// (above 0; one token every 1/PerSecond seconds, rounded to the
// nanosecond, between 1 ns and fsm.MaxDelay), in bursts of at most Burst
// (1 .. fsm.MaxRateBurst; 0 means 1).
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// every is r's token interval and burst, or why r is refused.
func (r RateLimit) every() (time.Duration, uint32, error) {
	if math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) || r.PerSecond <= 0 {
		return 0, 0, fmt.Errorf("%w: %w: rate %v jobs per second: must be above 0", ErrInvalidRequest, fsm.ErrInvalidCommand, r.PerSecond)
	}
	every := math.Round(float64(time.Second) / r.PerSecond)
	if every < 1 || every > float64(fsm.MaxDelay) {
		return 0, 0, fmt.Errorf("%w: %w: rate %v jobs per second: one every %v, out of [1ns, %v]", ErrInvalidRequest, fsm.ErrInvalidCommand, r.PerSecond, time.Duration(every), fsm.MaxDelay)
	}
	burst := r.Burst
	if burst == 0 {
		burst = 1
	}
	if burst < 1 || burst > fsm.MaxRateBurst {
		return 0, 0, fmt.Errorf("%w: %w: rate burst %d out of [1, %d]", ErrInvalidRequest, fsm.ErrInvalidCommand, r.Burst, fsm.MaxRateBurst)
	}
	return time.Duration(every), uint32(burst), nil
}

// SetLimit sets the concurrency limit of queue (kind empty) or of one
// kind of it: claims lease a job of it only while fewer than max are
// running. max must be 1 .. math.MaxUint32 (ErrInvalidRequest otherwise:
// ClearLimit removes a limit). Idempotent, retried until known; its error
// is of exactly one outcome class, as Pause's.
func (c *Controller) SetLimit(ctx context.Context, queue, kind string, max int) error {
	if max < 1 || int64(max) > math.MaxUint32 {
		return &classed{class: ErrInvalidRequest, cause: fmt.Errorf("%w: concurrency limit %d out of [1, %d] (clear the limit instead)", fsm.ErrInvalidCommand, max, uint32(math.MaxUint32))}
	}
	_, err := c.applyResolving(ctx, &fsm.SetLimitCmd{Queue: queue, Kind: kind, Max: uint32(max)}, "", nil)
	return err
}

// ClearLimit removes the concurrency limit of queue (kind empty) or of
// one kind of it; clearing none succeeds.
func (c *Controller) ClearLimit(ctx context.Context, queue, kind string) error {
	_, err := c.applyResolving(ctx, &fsm.ClearLimitCmd{Queue: queue, Kind: kind}, "", nil)
	return err
}

// SetRate sets queue's rate (see RateLimit). A new or changed rate starts
// with a full bucket. Idempotent, retried until known.
func (c *Controller) SetRate(ctx context.Context, queue string, r RateLimit) error {
	every, burst, err := r.every()
	if err != nil {
		return err
	}
	_, err = c.applyResolving(ctx, &fsm.SetRateCmd{Queue: queue, Every: every, Burst: burst}, "", nil)
	return err
}

// ClearRate removes queue's rate; clearing none succeeds.
func (c *Controller) ClearRate(ctx context.Context, queue string) error {
	_, err := c.applyResolving(ctx, &fsm.ClearRateCmd{Queue: queue}, "", nil)
	return err
}

// Limits returns every queue's limits in queue order, read with cons
// (Linearizable: they reflect every change acknowledged before the call).
// Rate tokens are reported at this member's clock.
func (c *Controller) Limits(ctx context.Context, cons Consistency) ([]QueueLimits, error) {
	if err := c.read(ctx, cons); err != nil {
		return nil, err
	}
	return c.jobs.Limits(c.cfg.Clock()), nil
}
