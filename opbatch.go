package jobraft

import (
	"context"
	"fmt"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// opBatcher coalesces concurrent lease commands (claims, extends, acks,
// naks, terms; fsm.Batchable) into shared raft entries (a coalescer), each
// of at most fsm.MaxBatch commands and about BatchMaxBytes bytes. A lone
// command is proposed as itself; two or more as one fsm.BatchCmd, where
// each gets its own result.
type opBatcher = coalescer[[]byte, opOutcome] // requests: commands encoded behind raft.Headroom bytes (encodeOwned)

// opOutcome is one command's answer: its result and error as propose
// returns them (a raft error, or the mapped refusal of this command).
type opOutcome struct {
	r   fsm.Result
	err error
}

func newOpBatcher(c *Controller) *opBatcher {
	return &opBatcher{
		inflightMax:   func() int { return c.cfg.BatchInflight },
		closedOutcome: opOutcome{err: ErrClosed},
		take: func(queue []*pending[[]byte, opOutcome]) int {
			n, size := 0, 0
			for n < len(queue) && n < fsm.MaxBatch {
				q := len(queue[n].req) - raft.Headroom
				if n > 0 && size+q > c.cfg.BatchMaxBytes {
					break
				}
				n, size = n+1, size+q
			}
			return n
		},
		send: func(batch []*pending[[]byte, opOutcome]) { sendOps(c, batch) },
	}
}

// sendOps proposes batch: a lone command as itself, more as a BatchCmd.
// Acks, naks and terms are answered without the job record (their callers
// read only the error).
func sendOps(c *Controller, batch []*pending[[]byte, opOutcome]) {
	if len(batch) == 1 {
		r, err := c.proposeBytes(c.life, batch[0].req, fsm.DecodeResultWithoutEndedJobs)
		batch[0].done <- opOutcome{r: r, err: err}
		return
	}
	cmds := make([][]byte, len(batch))
	for i, p := range batch {
		cmds[i] = p.req[raft.Headroom:]
	}
	enc, err := fsm.EncodeBatchWithRoom(cmds, raft.Headroom)
	var r fsm.Result
	if err == nil {
		r, err = c.proposeBytes(c.life, enc, fsm.DecodeResultWithoutEndedJobs)
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

// applyOp is apply for a lease command: it rides a shared entry. Its error
// is of exactly one outcome class: the context ending before the command
// was sent is ErrNotApplied, after it ErrOutcomeUnknown.
func (c *Controller) applyOp(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	enc, err := encodeOwned(cmd)
	if err != nil {
		return fsm.Result{}, classify(mapErr(err))
	}
	p, err := c.ops.enqueue(enc)
	if err != nil {
		return fsm.Result{}, classify(err)
	}
	select {
	case o := <-p.done:
		c.ops.recycle(p)
		return o.r, classify(o.err)
	case <-ctx.Done():
		if c.ops.withdraw(p) {
			c.ops.recycle(p)
			return fsm.Result{}, classify(ctx.Err()) // ErrNotApplied
		}
		return fsm.Result{}, &classed{class: ErrOutcomeUnknown, cause: fmt.Errorf("%w while its entry was in flight", ctx.Err())}
	}
}
