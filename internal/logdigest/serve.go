package logdigest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/raft"
)

// Serve answers one Method request about s, a member's log, with floor its
// persisted commit floor (nil: the store records none). It only reads s.
// A refused request returns an error wrapping ErrBadRequest or
// ErrUnknownOp; other errors are the store's or ctx's.
func Serve(ctx context.Context, s raft.LogStore, floor func() uint64, req []byte) ([]byte, error) {
	var q Request
	if err := json.Unmarshal(req, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	switch q.Op {
	case OpInfo:
	case OpDigests:
		if q.Parts <= 0 || q.Parts > MaxParts || q.To < q.From {
			return nil, fmt.Errorf("%w: [%d, %d] in %d parts (1 to %d)", ErrBadRequest, q.From, q.To, q.Parts, MaxParts)
		}
	case OpEntries:
		if q.To < q.From || q.To-q.From >= MaxEntries {
			return nil, fmt.Errorf("%w: entries [%d, %d] (at most %d)", ErrBadRequest, q.From, q.To, MaxEntries)
		}
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownOp, q.Op)
	}
	var rep Reply
	var err error
	if rep.First, err = s.FirstIndex(); err != nil {
		return nil, fmt.Errorf("logdigest: first index: %w", err)
	}
	if rep.Last, err = s.LastIndex(); err != nil {
		return nil, fmt.Errorf("logdigest: last index: %w", err)
	}
	if rep.Last == 0 {
		rep.First = 0
	}
	if floor != nil {
		rep.Floor, rep.HasFloor = floor(), true
	}
	switch q.Op {
	case OpDigests:
		if rep.Digests, err = RangeDigests(ctx, s, q.From, q.To, q.Parts); err != nil {
			return nil, err
		}
	case OpEntries:
		var l raft.Log
		var v View
		lo, hi := max(q.From, rep.First), min(q.To, rep.Last)
		for ix := lo; rep.Last != 0 && ix <= hi && ix >= lo; ix++ {
			if ReadView(s, ix, &l, &v) {
				rep.Entries = append(rep.Entries, Entry{Index: ix, View: v})
			}
		}
	}
	return json.Marshal(rep)
}
