package jobraft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jobraft/jobraft/fsm"
)

// opBatcher coalesces concurrent lease commands (claims, extends, acks,
// naks, terms; fsm.Batchable) into shared raft entries, as batcher does
// submits: up to BatchInflight entries in flight, and what arrives
// meanwhile forms the next ones, each of at most fsm.MaxBatch commands and
// about BatchMaxBytes bytes. A lone command is proposed as itself; two or
// more as one fsm.BatchCmd, where each gets its own result.
type opBatcher struct {
	c        *Controller
	mu       sync.Mutex
	queue    []*pendingOp
	inflight int
	closed   bool

	entries atomic.Uint64 // lease-command entries proposed
	ops     atomic.Uint64 // commands in them
}

type pendingOp struct {
	cmd  []byte // encoded by fsm.EncodeCommand
	sent bool
	done chan opOutcome // buffered: the sender never blocks
}

// opOutcome is one command's answer: its result and error as propose
// returns them (a raft error, or the mapped refusal of this command).
type opOutcome struct {
	r   fsm.Result
	err error
}

func newOpBatcher(c *Controller) *opBatcher { return &opBatcher{c: c} }

func (b *opBatcher) enqueue(cmd []byte) (*pendingOp, error) {
	p := &pendingOp{cmd: cmd, done: make(chan opOutcome, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.queue = append(b.queue, p)
	b.dispatchLocked()
	return p, nil
}

// withdraw removes p if it was not sent yet; false means it was sent.
func (b *opBatcher) withdraw(p *pendingOp) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.sent {
		return false
	}
	for i, q := range b.queue {
		if q == p {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

func (b *opBatcher) dispatchLocked() {
	for b.inflight < b.c.cfg.BatchInflight && len(b.queue) > 0 {
		n, size := 0, 0
		for n < len(b.queue) && n < fsm.MaxBatch {
			q := b.queue[n]
			if n > 0 && size+len(q.cmd) > b.c.cfg.BatchMaxBytes {
				break
			}
			n, size = n+1, size+len(q.cmd)
		}
		batch := make([]*pendingOp, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		for _, p := range batch {
			p.sent = true
		}
		b.inflight++
		go b.send(batch)
	}
}

func (b *opBatcher) send(batch []*pendingOp) {
	b.entries.Add(1)
	b.ops.Add(uint64(len(batch)))
	if len(batch) == 1 {
		r, err := b.c.proposeBytes(b.c.life, batch[0].cmd)
		batch[0].done <- opOutcome{r: r, err: err}
	} else {
		b.sendBatch(batch)
	}
	b.mu.Lock()
	b.inflight--
	b.dispatchLocked()
	b.mu.Unlock()
}

func (b *opBatcher) sendBatch(batch []*pendingOp) {
	cmds := make([][]byte, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	enc, err := fsm.EncodeBatch(cmds)
	var r fsm.Result
	if err == nil {
		r, err = b.c.proposeBytes(b.c.life, enc)
	}
	if err == nil && len(r.Batch) != len(batch) {
		err = fmt.Errorf("jobraft: batch entry %d answered %d commands of %d", r.Index, len(r.Batch), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- opOutcome{err: err}
			continue
		}
		p.done <- opOutcome{r: r.Batch[i], err: mapErr(r.Batch[i].Err())}
	}
}

// close refuses new commands; queued ones are answered ErrClosed (never
// sent).
func (b *opBatcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.done <- opOutcome{err: ErrClosed}
	}
	b.queue = nil
}

// applyOp is apply for a lease command: it rides a shared entry. Its error
// is of exactly one outcome class: the context ending before the command
// was sent is ErrNotApplied, after it ErrOutcomeUnknown.
func (c *Controller) applyOp(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	enc, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return fsm.Result{}, classify(mapErr(err))
	}
	p, err := c.ops.enqueue(enc)
	if err != nil {
		return fsm.Result{}, classify(err)
	}
	select {
	case o := <-p.done:
		return o.r, classify(o.err)
	case <-ctx.Done():
		if c.ops.withdraw(p) {
			return fsm.Result{}, classify(ctx.Err()) // ErrNotApplied
		}
		return fsm.Result{}, &classed{class: ErrOutcomeUnknown, cause: fmt.Errorf("%w while its entry was in flight", ctx.Err())}
	}
}
