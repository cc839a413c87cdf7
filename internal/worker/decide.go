package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Handler runs one job (jobraft.Handler).
type Handler func(ctx context.Context, job fsm.Job) (result []byte, err error)

// Config is a worker's configuration (jobraft.WorkerConfig), its defaults
// filled by the caller: Worker, LeaseTTL and PollWait are set.
type Config struct {
	Worker   string
	Queues   map[string]int
	Handlers map[string]Handler
	Default  Handler
	LeaseTTL time.Duration
	PollWait time.Duration
	OnError  func(job fsm.Job, err error)
}

// Claim is the claim a queue's loop makes, Max set per claim to its free
// slots.
type Claim struct {
	Queue    string
	Kinds    []string // nil: every kind (a Default handler)
	Worker   string
	Max      int
	LeaseTTL time.Duration
	Wait     time.Duration
	Slots    int // the queue's concurrency
}

// Plan checks cfg and returns each queue's claim, in queue order. Its
// error says what cannot work (the caller wraps it as invalid config): no
// queues, a concurrency below 1, no handler at all, a nil handler, more
// than fsm.MaxClaimKinds kinds without Default, or a queue, worker or kind
// name or lease TTL a claim would refuse (fsm.Validate).
func Plan(cfg Config) ([]Claim, error) {
	if len(cfg.Queues) == 0 {
		return nil, errors.New("no queues")
	}
	if len(cfg.Handlers) == 0 && cfg.Default == nil {
		return nil, errors.New("no handlers")
	}
	kinds := make([]string, 0, len(cfg.Handlers))
	for k, h := range cfg.Handlers {
		if h == nil {
			return nil, fmt.Errorf("nil handler for kind %q", k)
		}
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // the claim's bytes do not depend on map order
	if cfg.Default != nil {
		kinds = nil // every kind
	} else if len(kinds) > fsm.MaxClaimKinds {
		return nil, fmt.Errorf("%d kinds without a Default handler (a claim names at most %d)", len(kinds), fsm.MaxClaimKinds)
	}
	queues := make([]string, 0, len(cfg.Queues))
	for q := range cfg.Queues {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	out := make([]Claim, 0, len(queues))
	for _, q := range queues {
		n := cfg.Queues[q]
		if n < 1 {
			return nil, fmt.Errorf("queue %q: concurrency %d (at least 1)", q, n)
		}
		cl := Claim{Queue: q, Kinds: kinds, Worker: cfg.Worker, Max: 1, LeaseTTL: cfg.LeaseTTL, Wait: cfg.PollWait, Slots: n}
		if err := fsm.Validate(&fsm.ClaimCmd{Queues: []string{q}, Worker: cl.Worker, Max: 1, TTL: cl.LeaseTTL, Kinds: kinds}); err != nil {
			return nil, fmt.Errorf("queue %q: %w", q, err)
		}
		out = append(out, cl)
	}
	return out, nil
}

// Verb is what ends a lease after its handler returned.
type Verb int

// The verbs.
const (
	Drop Verb = iota // the lease ended under the handler: report nothing
	Ack              // the handler succeeded: ack with its result
	Nak              // it failed: nak (Delay 0: the job's backoff policy)
	Term             // it failed permanently: term (dead)
)

// Outcome is how the runner ends a lease.
type Outcome struct {
	Verb    Verb
	Result  []byte        // Ack
	Delay   time.Duration // Nak
	Message string        // Nak, Term: the handler error's text
}

// Decide is how the runner ends a lease whose handler returned res and
// herr, with cause its context's cause (nil while it was not canceled):
// a lease lost under the handler (cause ErrLeaseLost) is dropped, whatever
// it returned; nil acks with res; an error made by Permanent terms; one
// made by RetryAfter naks with its delay; any other error naks with the
// job's backoff policy.
func Decide(res []byte, herr, cause error) Outcome {
	var ra *retryAfterError
	var pe *permanentError
	switch {
	case errors.Is(cause, ErrLeaseLost):
		return Outcome{Verb: Drop}
	case herr == nil:
		return Outcome{Verb: Ack, Result: res}
	case errors.As(herr, &pe):
		return Outcome{Verb: Term, Message: herr.Error()}
	case errors.As(herr, &ra):
		return Outcome{Verb: Nak, Delay: ra.delay, Message: herr.Error()}
	default:
		return Outcome{Verb: Nak, Message: herr.Error()}
	}
}
