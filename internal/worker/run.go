package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/watchlog"
)

// Lease is a claimed job's lease as the runner drives it (*jobraft.Lease).
type Lease interface {
	Extend(ctx context.Context) error
	Ack(ctx context.Context, result []byte) error
	Nak(ctx context.Context, delay time.Duration, errMsg string) error
	Term(ctx context.Context, reason string) error
}

// Claimed is one job a claim leased.
type Claimed struct {
	Job   fsm.Job
	Token uint64
	Lease Lease
}

// Member is the controller a runner works for.
type Member struct {
	// Claim claims up to cl.Max jobs; a paused queue is (nil, nil).
	Claim func(ctx context.Context, cl Claim) ([]Claimed, error)
	// Gone reports that a lease operation's error means the lease is
	// over (stale, or the job removed).
	Gone func(err error) bool
	// Rec is the member's state machine: its fences end a handler when
	// its lease ends.
	Rec *watchlog.Recorder
	// Closed is closed when the controller closes.
	Closed <-chan struct{}
	// RetryPause is the pause after a failed claim; ReportTimeout bounds
	// ending a lease.
	RetryPause, ReportTimeout time.Duration
	Log                       hclog.Logger
}

// Run works on the claims Plan made from cfg until ctx ends or the member
// closes; then it cancels running handlers, reports what they return and
// returns once they are done.
func Run(ctx context.Context, m *Member, cfg *Config, claims []Claim) {
	var wg sync.WaitGroup
	for _, cl := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.runQueue(ctx, cfg, cl)
		}()
	}
	wg.Wait()
}

func (m *Member) closed() bool {
	select {
	case <-m.Closed:
		return true
	default:
		return false
	}
}

// runQueue claims as many jobs as it has free slots, runs each, and claims
// again as slots free up.
func (m *Member) runQueue(ctx context.Context, cfg *Config, cl Claim) {
	slots := make(chan struct{}, cl.Slots)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil && !m.closed() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	more:
		for free < cl.Slots {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		cl.Max = free
		leases, err := m.Claim(ctx, cl)
		for i := len(leases); i < free; i++ {
			<-slots
		}
		if err != nil && ctx.Err() == nil {
			m.report(cfg, fsm.Job{Queue: cl.Queue}, err)
			select {
			case <-ctx.Done():
			case <-m.Closed:
			case <-time.After(m.RetryPause):
			}
		}
		for _, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				m.runOne(ctx, cfg, l)
			}()
		}
	}
}

func (m *Member) report(cfg *Config, j fsm.Job, err error) {
	if cfg.OnError != nil {
		cfg.OnError(j, err)
		return
	}
	m.Log.Warn("worker", "job", j.ID, "queue", j.Queue, "error", err)
}

// runOne runs one job's handler, fenced and extended, and ends its lease
// as Decide says.
func (m *Member) runOne(ctx context.Context, cfg *Config, l Claimed) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unfence := m.Rec.Fence(l.Job.ID, l.Token, func(ev watchlog.Event) {
		cancel(fmt.Errorf("%w: job %s %s at index %d", ErrLeaseLost, ev.JobID, ev.Kind, ev.Index))
	})
	defer func() {
		if unfence != nil {
			unfence()
		}
	}()
	// A cancel (or expiry) applied between the claim and the fence above
	// is in the recorded history, not in the fence's future.
	if kind, _, ok := m.Rec.LeaseEnd(l.Job.ID, l.Token); ok {
		cancel(fmt.Errorf("%w: job %s %s before its handler started", ErrLeaseLost, l.Job.ID, kind))
	}
	extended := m.extend(hctx, cancel, cfg, l)
	h := cfg.Handlers[l.Job.Kind]
	if h == nil {
		h = cfg.Default
	}
	var res []byte
	var herr error
	if h == nil {
		// Unreachable through Run (it claims only its handlers' kinds);
		// a lease made by hand for another kind goes back to its queue.
		herr = RetryAfter(fmt.Errorf("no handler for kind %q on worker %s", l.Job.Kind, cfg.Worker), cfg.PollWait)
	} else {
		res, herr = call(hctx, h, l.Job)
	}
	extended()
	o := Decide(res, herr, context.Cause(hctx))
	// The handler is done: a lease end now changes nothing, and a fence
	// left on would have the report's own entry decoded as it applies.
	unfence()
	unfence = nil
	if o.Verb == Drop {
		m.Log.Debug("lease lost; result dropped", "job", l.Job.ID, "token", l.Token, "cause", context.Cause(hctx))
		return
	}
	// Report with a fresh context: Run's may have ended.
	rctx, rcancel := context.WithTimeout(context.Background(), m.ReportTimeout)
	defer rcancel()
	var err error
	switch o.Verb {
	case Ack:
		err = l.Lease.Ack(rctx, o.Result)
	case Term:
		err = l.Lease.Term(rctx, o.Message)
	case Nak:
		err = l.Lease.Nak(rctx, o.Delay, o.Message)
	}
	if err != nil && !m.Gone(err) {
		m.report(cfg, l.Job, err)
	}
}

// extend extends l every TTL/3 until the returned func is called (it waits
// for an extend under way to end, and none starts after it) or hctx ends;
// a lease found gone cancels hctx. It holds a timer, not a goroutine: each
// extend runs on the timer's own goroutine and arms the timer again.
func (m *Member) extend(hctx context.Context, cancel context.CancelCauseFunc, cfg *Config, l Claimed) (stop func()) {
	period := max(cfg.LeaseTTL/3, time.Millisecond)
	var mu sync.Mutex // held while an extend runs
	stopped := false  // under mu
	var t *time.Timer
	mu.Lock() // t is set before the first extend reads it
	t = time.AfterFunc(period, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || hctx.Err() != nil {
			return
		}
		ectx, ecancel := context.WithTimeout(hctx, cfg.LeaseTTL/3)
		err := l.Lease.Extend(ectx)
		ecancel()
		if err != nil && m.Gone(err) {
			cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			return
		}
		if err != nil && hctx.Err() == nil {
			m.report(cfg, l.Job, err)
		}
		t.Reset(period)
	})
	mu.Unlock()
	return func() {
		t.Stop()
		mu.Lock() // an extend under way ends first; a later fire sees stopped
		stopped = true
		mu.Unlock()
	}
}

// call runs h, a panic recovered as its error.
func call(ctx context.Context, h Handler, j fsm.Job) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, j)
}
