package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal/segment"
)

// Result is a committed proposal: its raft index and what the state
// machine's Apply returned for it.
type Result struct {
	Index uint64
	Data  []byte
}

// Remote error codes of the propose RPC.
const (
	codeRejected      = "jr.rejected"
	codeIndeterminate = "jr.indeterminate"
	codeNotLeader     = "jr.not_leader"
)

// Propose replicates cmd and returns the state machine's result once the
// entry is committed and applied on the leader. On a follower the command
// is forwarded to the leader. The leader stamps its clock into the command
// (Entry.Time) and the payload CRC into the entry (segment.Stamp).
//
// A nil error means committed exactly once. An error matches ErrRejected
// (not committed, never will be; Propose already retried those while ctx
// allowed, e.g. across a leader change, and for at most Config.LeaderWait:
// then the cause is a *NoLeaderError) or ErrIndeterminate (may have been
// committed: leadership lost after append, timeout or connection loss after
// sending). Retry an indeterminate proposal only with an idempotency key in
// the command.
//
// A forwarded proposal ends as soon as this member learns of another leader
// than the one it was sent to: indeterminate, with ErrLeaderChanged as its
// cause. A frozen leader thus holds it no longer than the election that
// replaces it, not until ctx's deadline.
func (n *Node) Propose(ctx context.Context, cmd []byte) (Result, error) {
	return n.propose(ctx, cmd, nil)
}

// Headroom is the room ProposeOwned needs before a command: the size of
// the envelope a local proposal wraps the command in.
const Headroom = envelopeSize

// ProposeOwned is Propose for a command that follows Headroom bytes of
// room: buf is that room and then the command. The node writes the entry's
// envelope into the room instead of copying the command into a new entry
// (a submit of many jobs is copied once less). buf belongs to the node
// from the call on: the caller must not change or reuse it, whatever the
// outcome. A buf shorter than Headroom is refused (ErrRejected).
func (n *Node) ProposeOwned(ctx context.Context, buf []byte) (Result, error) {
	if len(buf) < Headroom {
		return Result{}, rejected("", fmt.Errorf("raft: ProposeOwned: %d bytes, no room for the envelope (%d)", len(buf), Headroom))
	}
	return n.propose(ctx, buf[Headroom:], buf)
}

// propose is Propose; own, when not nil, is cmd with Headroom bytes of room
// before it, which the first local attempt seals in place.
func (n *Node) propose(ctx context.Context, cmd, own []byte) (Result, error) {
	if len(cmd) > n.cfg.MaxCommandSize {
		return Result{}, rejected("", fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(cmd), n.cfg.MaxCommandSize))
	}
	var last error
	start := time.Now()
	for {
		if n.isClosed() {
			return Result{}, rejected("", ErrClosed)
		}
		addr, id := n.r.LeaderWithID()
		switch {
		case id == "":
			last = rejected("", ErrNoLeader)
		case string(id) == n.cfg.ID:
			// Only the first local attempt seals own: a rejected attempt
			// never reached the log, but a retry gets a buffer of its own
			// all the same.
			res, err := n.proposeSealed(ctx, cmd, own)
			own = nil
			if err == nil || !errors.Is(err, ErrRejected) || !retryable(err) {
				return res, err
			}
			last = err
		default:
			res, err := n.forward(ctx, start, string(id), string(addr), cmd)
			if err == nil || !errors.Is(err, ErrRejected) {
				return res, err
			}
			last = err
		}
		// Rejected: nothing happened; wait for a (new) leader and retry,
		// for at most LeaderWait.
		left := n.cfg.LeaderWait - time.Since(start)
		if left <= 0 {
			nl := n.noLeader(start, last)
			return Result{}, rejected(nl.Leader, nl)
		}
		select {
		case <-ctx.Done():
			return Result{}, last
		case <-n.closed:
			return Result{}, rejected("", ErrClosed)
		case <-time.After(min(n.cfg.HeartbeatTimeout/10, left)):
		}
	}
}

// retryable: a local rejection worth retrying (leadership moving).
func retryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrEnqueueTimeout)
}

func (n *Node) proposeLocal(ctx context.Context, cmd []byte) (Result, error) {
	return n.proposeSealed(ctx, cmd, nil)
}

// proposeSealed is proposeLocal, sealing own (cmd with Headroom bytes of
// room before it) in place when it is not nil.
func (n *Node) proposeSealed(ctx context.Context, cmd, own []byte) (Result, error) {
	var data []byte
	if own != nil {
		data = sealInPlace(n.cfg.Clock(), own)
	} else {
		data = seal(n.cfg.Clock(), cmd)
	}
	l := hraft.Log{Type: hraft.LogCommand, Data: data}
	segment.Stamp(&l)
	f := n.r.ApplyLog(l, n.cfg.ApplyTimeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// It may be in the log already: indeterminate.
		return Result{}, indeterminate(n.cfg.ID, ctx.Err())
	}
	switch {
	case err == nil:
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrLeadershipTransferInProgress),
		errors.Is(err, hraft.ErrEnqueueTimeout):
		return Result{}, rejected(n.cfg.ID, err)
	default: // ErrLeadershipLost, ErrRaftShutdown, ErrAbortedByRestore, ...
		return Result{}, indeterminate(n.cfg.ID, err)
	}
	res, _ := f.Response().(applyResult)
	if errors.Is(res.err, errNotDurable) {
		// Committed by raft's count, not applied here: the others may
		// still commit it.
		return Result{}, indeterminate(n.cfg.ID, res.err)
	}
	if res.err != nil {
		// Committed, but its envelope was unreadable: cannot happen for
		// commands sealed above; reported rather than hidden.
		return Result{Index: f.Index()}, fmt.Errorf("raft: committed entry %d not applied: %w", f.Index(), res.err)
	}
	return Result{Index: f.Index(), Data: res.data}, nil
}

// forward sends cmd to the leader id at leader. It ends, indeterminate
// (ErrLeaderChanged), as soon as this member learns of another leader
// (leaderwatch.go).
func (n *Node) forward(ctx context.Context, start time.Time, id, leader string, cmd []byte) (Result, error) {
	fctx, done := n.leaders.forward(ctx, id, n.knownLeader, start.Add(n.cfg.LeaderWait))
	defer done()
	reply, err := n.caller.Call(transport.ExpectPeer(fctx, id), leader, methodPropose, cmd)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(fctx), ErrLeaderChanged) {
		err = fmt.Errorf("%w (%w)", context.Cause(fctx), err)
		if errors.Is(err, errLapsed) {
			// What is missing, in words; quoted, not matched: the
			// proposal may still commit, so it is no ErrNoLeader.
			err = fmt.Errorf("%w; %v", err, n.noLeader(start, nil))
		}
	}
	if err != nil {
		var re *transport.RemoteError
		switch {
		case errors.Is(err, transport.ErrNotDelivered):
			return Result{}, rejected(leader, err)
		case errors.As(err, &re) && (re.Code == codeRejected || re.Code == codeNotLeader || !re.HandlerRan()):
			return Result{}, rejected(leader, err)
		default:
			return Result{}, indeterminate(leader, err)
		}
	}
	if len(reply) < 8 {
		return Result{}, indeterminate(leader, fmt.Errorf("raft: short propose reply of %d bytes", len(reply)))
	}
	return Result{Index: binary.LittleEndian.Uint64(reply), Data: reply[8:]}, nil
}

func (n *Node) handlePropose(ctx context.Context, req []byte) ([]byte, error) {
	if n.r.State() != hraft.Leader {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: "not the leader"}
	}
	if len(req) > n.cfg.MaxCommandSize {
		return nil, &transport.RemoteError{Code: codeRejected, Message: ErrTooLarge.Error()}
	}
	res, err := n.proposeLocal(ctx, req)
	if err != nil {
		code := codeIndeterminate
		if errors.Is(err, ErrRejected) {
			code = codeRejected
		}
		return nil, &transport.RemoteError{Code: code, Message: err.Error()}
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(res.Data)), res.Index)
	return append(out, res.Data...), nil
}
