package jobraft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Controller is one member's job API: a raft.Node replicating the job state
// machine (fsm.Jobs), with submit batching and idempotent retries, leases,
// leader duties (lease expiry, retention), queries and a watch stream. Every
// method may be called on any member and from any goroutine.
type Controller struct {
	cfg  Config
	node *raft.Node
	rec  *recorder
	log  hclog.Logger
	sub  *batcher

	closed    chan struct{}
	life      context.Context // canceled by Close
	kill      context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	goMu      sync.Mutex // orders spawn's wg.Add before Close's wg.Wait
	wg        sync.WaitGroup
}

// Open starts this member's node and controller. It does not wait for a
// leader: calls made before one is elected wait for it (within their
// context). ctx bounds opening only.
func Open(ctx context.Context, cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, rec: newRecorder(cfg.WatchRetainEntries, cfg.WatchRetainBytes), closed: make(chan struct{})}
	c.life, c.kill = context.WithCancel(context.Background())
	if c.node, err = raft.Open(cfg.Config, c.rec); err != nil {
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
	c.sub = newBatcher(c)
	c.wg.Add(1)
	go c.duties()
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
		c.sub.close()
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

// apply proposes one non-submit command and decodes its result. A refused
// command returns the mapped fsm error. The error class of a failed
// proposal is kept (raft.ErrRejected / raft.ErrIndeterminate).
func (c *Controller) apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return fsm.Result{}, mapErr(err)
	}
	if c.isClosed() {
		return fsm.Result{}, ErrClosed
	}
	pctx, cancel := c.opCtx(ctx)
	res, err := c.node.Propose(pctx, b)
	cancel()
	if err != nil {
		return fsm.Result{}, err
	}
	r, err := fsm.DecodeResult(res.Data)
	if err != nil {
		return fsm.Result{}, fmt.Errorf("jobraft: result of entry %d: %w", res.Index, err)
	}
	return r, mapErr(r.Err())
}

// applyResolving proposes cmd; if an attempt's outcome is unknown it
// retries while ctx allows. A retry that is refused after an unknown
// attempt is resolved by resolve (given a linearizable read of the job):
// applied means the earlier attempt applied; !known means the read cannot
// tell. It returns ErrOutcomeUnknown (with raft.ErrIndeterminate) when it
// cannot tell, and then the last attempt's error only as text: a refusal
// of the retry (stale, invalid state) or a rejected last attempt is not the
// outcome, and matching its class would tell the caller nothing changed.
func (c *Controller) applyResolving(ctx context.Context, cmd fsm.Command, id string, resolve func(fsm.Job) (applied, known bool)) (fsm.Result, error) {
	unknown := false
	for {
		r, err := c.apply(ctx, cmd)
		switch {
		case err == nil:
			return r, nil
		case errors.Is(err, raft.ErrIndeterminate):
			unknown = true
		case errors.Is(err, raft.ErrRejected) && !errors.Is(err, raft.ErrTooLarge) && ctx.Err() == nil && !c.isClosed():
			// nothing happened; Propose gave up only on its own timeout
		case unknown && (errors.Is(err, ErrStaleLease) || errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound)):
			j, gerr := c.Get(ctx, id, Linearizable)
			if gerr == nil && resolve != nil {
				applied, known := resolve(j)
				if applied {
					return fsm.Result{Jobs: []fsm.Job{j}}, nil
				}
				if !known {
					return r, fmt.Errorf("%w: %w: %v", ErrOutcomeUnknown, raft.ErrIndeterminate, err)
				}
			}
			if gerr != nil {
				// Not found after an unknown attempt: the attempt may have
				// applied and retention swept the job since. Say so.
				return r, fmt.Errorf("%w: %w (resolving: %v)", ErrOutcomeUnknown, raft.ErrIndeterminate, gerr)
			}
			return r, err
		default:
			if unknown {
				return r, fmt.Errorf("%w: %w: %v", ErrOutcomeUnknown, raft.ErrIndeterminate, err)
			}
			return r, err
		}
		if ctx.Err() != nil || c.isClosed() {
			if unknown {
				return r, fmt.Errorf("%w: %w: %v", ErrOutcomeUnknown, raft.ErrIndeterminate, err)
			}
			return r, err
		}
	}
}
