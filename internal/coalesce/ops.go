package coalesce

import (
	"fmt"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Ops coalesces concurrent lease commands (claims, extends, acks, naks,
// terms; fsm.Batchable) into shared entries, each of at most fsm.MaxBatch
// commands and about Limits.MaxBytes bytes. A lone command is proposed as
// itself; two or more as one fsm.BatchCmd, where each gets its own result.
// Its requests are commands encoded behind raft.Headroom bytes of room
// (fsm.EncodeCommandWithRoom).
type Ops = Coalescer[[]byte, OpOutcome]

// OpOutcome is one command's answer: its result, and the proposal's error
// or the command's own refusal (an fsm error, unmapped).
type OpOutcome struct {
	R   fsm.Result
	Err error
}

// ProposeBytes proposes an encoded command behind raft.Headroom bytes of
// room and decodes its result with decode: the proposal's error, or the
// refusal of the whole entry.
type ProposeBytes func(b []byte, decode func([]byte) (fsm.Result, error)) (fsm.Result, error)

// NewOps returns g's lease command coalescer; a closed one answers
// errClosed.
func NewOps(g *Gate, l Limits, propose ProposeBytes, errClosed error) *Ops {
	return New(g, Policy[[]byte, OpOutcome]{
		Inflight:  l.Inflight,
		Closed:    OpOutcome{Err: errClosed},
		ErrClosed: errClosed,
		Take:      func(queue []*Pending[[]byte, OpOutcome]) int { return takeOps(queue, l.MaxBytes) },
		Send:      func(batch []*Pending[[]byte, OpOutcome]) { sendOps(propose, batch) },
	})
}

// takeOps is how many commands from the head of queue the next entry
// takes: at least one, at most fsm.MaxBatch, then as many as fit maxBytes.
func takeOps(queue []*Pending[[]byte, OpOutcome], maxBytes int) int {
	n, size := 0, 0
	for n < len(queue) && n < fsm.MaxBatch {
		q := len(queue[n].Req) - raft.Headroom
		if n > 0 && size+q > maxBytes {
			break
		}
		n, size = n+1, size+q
	}
	return n
}

// sendOps proposes batch: a lone command as itself, more as a BatchCmd.
// Acks, naks and terms are answered without the job record (their callers
// read only the error).
func sendOps(propose ProposeBytes, batch []*Pending[[]byte, OpOutcome]) {
	if len(batch) == 1 {
		r, err := propose(batch[0].Req, fsm.DecodeResultWithoutEndedJobs)
		batch[0].Answer(OpOutcome{R: r, Err: err})
		return
	}
	cmds := make([][]byte, len(batch))
	for i, p := range batch {
		cmds[i] = p.Req[raft.Headroom:]
	}
	enc, err := fsm.EncodeBatchWithRoom(cmds, raft.Headroom)
	var r fsm.Result
	if err == nil {
		r, err = propose(enc, fsm.DecodeResultWithoutEndedJobs)
	}
	if err == nil && len(r.Batch) != len(batch) {
		err = fmt.Errorf("jobraft: batch entry %d answered %d commands of %d", r.Index, len(r.Batch), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.Answer(OpOutcome{Err: err})
			continue
		}
		p.Answer(OpOutcome{R: r.Batch[i], Err: r.Batch[i].Err()})
	}
}
