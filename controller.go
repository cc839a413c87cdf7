package jobraft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/coalesce"
	"github.com/jobraft/jobraft/internal/duties"
	"github.com/jobraft/jobraft/internal/watchlog"
	"github.com/jobraft/jobraft/raft"
)

// Controller is one member's job API: a raft.Node replicating the job state
// machine (fsm.Jobs), with submit batching and idempotent retries, leases,
// leader duties (lease expiry, retention), queries and a watch stream. Every
// method may be called on any member and from any goroutine.
type Controller struct {
	cfg  Config
	node *raft.Node
	rec  *watchlog.Recorder // the replicated state machine, with its watch log
	jobs *fsm.Jobs          // rec's state
	log  hclog.Logger
	sub  *coalesce.Submits
	ops  *coalesce.Ops
	hold *coalesce.Gate // the hold sub and ops share

	closed    chan struct{}
	life      context.Context // canceled by Close
	kill      context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	goMu      sync.Mutex // orders spawn's wg.Add before Close's wg.Wait
	wg        sync.WaitGroup

	// emptyClaims counts waiting claims' proposals that came back empty
	// (another claimant took the job first, or it was not due by the
	// leader's clock): tests read it.
	emptyClaims atomic.Uint64
	// claimWoken, if set (tests), is called by a waiting claim when it is
	// woken, before it looks at the state again.
	claimWoken func()
}

// Open starts this member's node and controller. It does not wait for a
// leader: calls made before one is elected wait for it (within their
// context). ctx bounds opening only. opts are test instrumentation,
// passed on to raft.Open (raft.Option); a host passes none.
func Open(ctx context.Context, cfg Config, opts ...raft.Option) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, rec: watchlog.New(cfg.WatchRetainEntries, cfg.WatchRetainBytes), closed: make(chan struct{})}
	c.jobs = c.rec.Jobs()
	c.life, c.kill = context.WithCancel(context.Background())
	if c.node, err = raft.Open(cfg.Config, c.rec, opts...); err != nil {
		c.kill()
		return nil, err
	}
	// raft.Open filled its defaults (Clock, Logger) in its own copy; take
	// the same ones.
	if c.cfg.Clock == nil {
		c.cfg.Clock = time.Now
	}
	c.log = cfg.Logger
	if c.log == nil {
		c.log = hclog.New(&hclog.LoggerOptions{Name: "jobraft", Level: hclog.Info})
	}
	c.log = c.log.Named("controller").With("member", cfg.ID)
	c.hold = coalesce.NewGate(c.cfg.BatchHold)
	lim := coalesce.Limits{Inflight: c.cfg.BatchInflight, MaxJobs: c.cfg.BatchMaxJobs, MaxBytes: c.cfg.BatchMaxBytes}
	c.sub = coalesce.NewSubmits(c.hold, lim, func(cmd fsm.Command) (fsm.Result, error) { return c.propose(c.life, cmd) }, ErrClosed)
	c.ops = coalesce.NewOps(c.hold, lim, func(b []byte, decode func([]byte) (fsm.Result, error)) (fsm.Result, error) {
		return c.proposeBytes(c.life, b, decode)
	}, ErrClosed)
	c.wg.Add(1)
	go func() { // the leader's duties: lease expiry, retention sweeps, schedule fires
		defer c.wg.Done()
		duties.Run(c.life, duties.Shell{Node: c.node, Jobs: c.jobs, Clock: c.cfg.Clock, ExpireInterval: c.cfg.ExpireInterval,
			ProposeTimeout: c.cfg.ProposeTimeout, Log: c.log},
			duties.Policy{RetainFor: c.cfg.RetainFor, RetainPerQueue: c.cfg.RetainPerQueue, SweepInterval: c.cfg.SweepInterval})
	}()
	return c, nil
}

// Node returns the member's raft node (status, membership, events).
func (c *Controller) Node() *raft.Node { return c.node }

// Close stops the controller and its node. Submits still waiting are
// answered ErrNotSubmitted (never sent) or ErrMayExist (in flight); watches
// end with ErrClosed. ctx bounds the wait for in-flight work; the node is
// closed in any case.
func (c *Controller) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.goMu.Lock()
		close(c.closed) // no spawn after this: wg.Wait below sees every Add
		c.goMu.Unlock()
		c.kill()
		c.sub.Close()
		c.ops.Close()
		done := make(chan struct{})
		go func() {
			c.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
		}
		c.closeErr = c.node.Close()
	})
	return c.closeErr
}

// spawn runs fn on a goroutine Close waits for. It returns false, and runs
// nothing, once Close has begun.
func (c *Controller) spawn(fn func()) bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.isClosed() {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

func (c *Controller) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// opCtx bounds one proposal by ProposeTimeout, the caller's context and
// Close.
func (c *Controller) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ProposeTimeout)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// propose proposes one command and decodes its result. A refused command
// returns the mapped fsm error (mapErr); a failed proposal its raft error
// (raft.ErrRejected / raft.ErrIndeterminate). The submit path reads these
// raw errors; other operations classify them (apply).
func (c *Controller) propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	b, err := encodeOwned(cmd)
	if err != nil {
		return fsm.Result{}, mapErr(err)
	}
	return c.proposeBytes(ctx, b, fsm.DecodeResult)
}

// encodeOwned encodes cmd behind raft.Headroom bytes of room, for
// proposeBytes.
func encodeOwned(cmd fsm.Command) ([]byte, error) {
	return fsm.EncodeCommandWithRoom(cmd, raft.Headroom)
}

// proposeBytes is propose for an encoded command behind raft.Headroom bytes
// of room (the node seals the entry there: raft.Node.ProposeOwned; b is
// the node's from the call on), its result decoded by decode.
func (c *Controller) proposeBytes(ctx context.Context, b []byte, decode func([]byte) (fsm.Result, error)) (fsm.Result, error) {
	if c.isClosed() {
		return fsm.Result{}, ErrClosed
	}
	pctx, cancel := c.opCtx(ctx)
	res, err := c.node.ProposeOwned(pctx, b)
	cancel()
	if err != nil {
		return fsm.Result{}, err
	}
	r, err := decode(res.Data)
	if err != nil {
		return fsm.Result{}, fmt.Errorf("jobraft: result of entry %d: %w", res.Index, err)
	}
	return r, mapErr(r.Err())
}

// apply is propose with its error in exactly one outcome class (classify).
// Lease commands (fsm.Batchable) share entries with concurrent ones
// (applyOp).
func (c *Controller) apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if fsm.Batchable(cmd.Type()) {
		return c.applyOp(ctx, cmd)
	}
	r, err := c.propose(ctx, cmd)
	return r, classify(err)
}

// applyOp is apply for a lease command: it rides a shared entry
// (coalesce.Ops). Its error is of exactly one outcome class: the context
// ending before the command was sent is ErrNotApplied, after it
// ErrOutcomeUnknown.
func (c *Controller) applyOp(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	enc, err := encodeOwned(cmd)
	if err != nil {
		return fsm.Result{}, classify(mapErr(err))
	}
	p, err := c.ops.Enqueue(enc)
	if err != nil {
		return fsm.Result{}, classify(err)
	}
	select {
	case o := <-p.Done():
		c.ops.Recycle(p)
		return o.R, classify(o.Err)
	case <-ctx.Done():
		if c.ops.Withdraw(p) {
			c.ops.Recycle(p)
			return fsm.Result{}, classify(ctx.Err()) // ErrNotApplied
		}
		return fsm.Result{}, &classed{class: ErrOutcomeUnknown, cause: fmt.Errorf("%w while its entry was in flight", ctx.Err())}
	}
}

// retryPause is the pause before an operation's next attempt after one
// that failed without an answer: a tenth of the heartbeat timeout.
func (c *Controller) retryPause() time.Duration {
	d := c.cfg.HeartbeatTimeout / 10
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	return d
}
