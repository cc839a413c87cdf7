package fsm

import (
	"encoding/binary"
	"fmt"
)

// MaxBatch bounds the commands of one BatchCmd.
const MaxBatch = 4096

// BatchCmd carries many lease commands in one raft entry: claims, extends,
// acks, naks and terms, applied in order as if each were its own entry at
// the batch's index (every claim's leases take the entry index as their
// token). Each command gets its own result, refusals included: one stale
// ack does not refuse the others. Concurrent workers' commands coalesce
// into one entry this way, as submits do into one SubmitCmd.
type BatchCmd struct{ Cmds []Command }

// Type implements Command.
func (BatchCmd) Type() CommandType { return CmdBatch }

// Batchable reports whether commands of type t may ride in a BatchCmd.
func Batchable(t CommandType) bool {
	switch t {
	case CmdClaim, CmdExtend, CmdAck, CmdNak, CmdTerm:
		return true
	}
	return false
}

// Batch encoding (command type 13, format version 1):
//
//	version (1) | type (13) | count (uvarint, 1..MaxBatch) |
//	count × (length (uvarint) | an encoded command of a batchable type)
//
// The inner commands are encoded as EncodeCommand encodes them alone, so a
// batch can be assembled from commands encoded one by one (EncodeBatch).

// EncodeBatch wraps commands already encoded by EncodeCommand into the
// bytes of one BatchCmd entry. It checks each one's header (a batchable
// type) and the count, not their fields (EncodeCommand did).
func EncodeBatch(cmds [][]byte) ([]byte, error) { return EncodeBatchWithRoom(cmds, 0) }

// EncodeBatchWithRoom is EncodeBatch with room bytes (zero) before the
// encoding (see EncodeCommandWithRoom).
func EncodeBatchWithRoom(cmds [][]byte, room int) ([]byte, error) {
	if len(cmds) == 0 || len(cmds) > MaxBatch {
		return nil, fmt.Errorf("%w: batch of %d commands (1..%d)", ErrTooLarge, len(cmds), MaxBatch)
	}
	n := 2 + binary.MaxVarintLen64
	for _, c := range cmds {
		if len(c) < 2 || !Batchable(CommandType(c[1])) {
			return nil, fmt.Errorf("%w: batch holds a command that is not a lease command", ErrInvalidCommand)
		}
		n += binary.MaxVarintLen64 + len(c)
	}
	b := make([]byte, room, room+n)
	b = append(b, FormatVersion, byte(CmdBatch))
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = appendBytes(b, c)
	}
	return b, nil
}

func appendBatch(b []byte, c *BatchCmd) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.Cmds)))
	var sub []byte
	for _, x := range c.Cmds {
		sub = appendCommand(sub[:0], normalize(x))
		b = appendBytes(b, sub)
	}
	return b
}

func decodeBatch(d *decoder) *BatchCmd {
	n := d.count(MaxBatch, 3)
	c := &BatchCmd{Cmds: make([]Command, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		raw := d.raw()
		if d.err != nil {
			break
		}
		if len(raw) < 2 || !Batchable(CommandType(raw[1])) {
			d.fail("batch command %d is not a lease command", i)
			break
		}
		x, err := DecodeCommand(raw)
		if err != nil {
			if d.err == nil {
				d.err = fmt.Errorf("batch command %d: %w", i, err)
			}
			break
		}
		c.Cmds = append(c.Cmds, x)
	}
	return c
}

func validateBatch(c *BatchCmd, all bool) *refusal {
	if len(c.Cmds) == 0 {
		return refuse(CodeInvalidCommand, "empty batch")
	}
	if len(c.Cmds) > MaxBatch {
		return refuse(CodeTooLarge, "batch of %d commands (max %d)", len(c.Cmds), MaxBatch)
	}
	for i, x := range c.Cmds {
		x = normalize(x)
		if x == nil || !Batchable(x.Type()) {
			return refuse(CodeInvalidCommand, "batch command %d (%T) is not a lease command", i, c.Cmds[i])
		}
		if all {
			if r := validate(x, true); r != nil {
				r.detail = fmt.Sprintf("batch command %d: %s", i, r.detail)
				return r
			}
		}
	}
	return nil
}

// batch applies each command of c at entry e, each with its own result.
func (s *state) batch(e Entry, now int64, c *BatchCmd, r *result) {
	r.batch = make([]*result, len(c.Cmds))
	all := make([]result, len(c.Cmds)) // one allocation for the batch's results
	for i, x := range c.Cmds {
		sr := &all[i]
		sr.index, sr.cmd = e.Index, x.Type()
		s.applyOne(e, now, x, sr)
		r.batch[i] = sr
	}
}
