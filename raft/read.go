package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// LinearizableRead waits until this member's state machine reflects every
// write acknowledged before the call began, and returns the read index. It
// works on any member: the leader confirms its leadership with a quorum and
// hands out its commit index (only after committing an entry of its own
// term, so a new leader never serves an older commit index); this member
// then waits until it has applied up to that index. Query the state machine
// after it returns. Getting the read index takes at most Config.LeaderWait:
// past it the error matches ErrNoLeader (a *NoLeaderError).
func (n *Node) LinearizableRead(ctx context.Context) (uint64, error) {
	idx, err := n.ReadIndex(ctx)
	if err != nil {
		return 0, err
	}
	return idx, n.waitApplied(ctx, idx)
}

// ReadIndex is LinearizableRead's first step: the leader's commit index,
// confirmed by a quorum in its current term, at least as new as every
// write acknowledged before the call, without waiting for this member to
// apply it. A member that has applied it has applied everything the
// cluster acknowledged when it asked (a readiness check: a member catching
// up knows a commit index of its own far behind the leader's, or 0). It
// takes at most Config.LeaderWait (ErrNoLeader, a *NoLeaderError).
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	start := time.Now()
	// Reaching a leader and getting its read index; applying up to it is
	// bounded by ctx only (a member catching up may take longer).
	lctx, cancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
	defer cancel()
	for {
		if n.isClosed() {
			return 0, ErrClosed
		}
		addr, id := n.r.LeaderWithID()
		var idx uint64
		var err error
		switch {
		case id == "":
			err = ErrNoLeader
		case string(id) == n.cfg.ID:
			idx, err = n.readIndexLocal(lctx)
		default:
			// A read index asked of a leader that froze ends as soon as this
			// member learns of another leader, and is asked again there
			// (leaderwatch.go; a read is safe to repeat).
			var reply []byte
			fctx, done := n.leaders.forward(lctx, string(id), n.knownLeader, time.Time{})
			reply, err = n.caller.Call(transport.ExpectPeer(fctx, string(id)), string(addr), methodReadIndex, nil)
			done()
			if err == nil && len(reply) != 8 {
				err = fmt.Errorf("raft: read index reply of %d bytes", len(reply))
			}
			if err == nil {
				idx = binary.LittleEndian.Uint64(reply)
			}
		}
		if err == nil {
			return idx, nil
		}
		select {
		case <-lctx.Done(): // ctx's end, or LeaderWait's
			if ctx.Err() != nil {
				return 0, fmt.Errorf("raft: linearizable read: %w (last error: %v)", ctx.Err(), err)
			}
			return 0, fmt.Errorf("raft: linearizable read: %w", n.noLeader(start, err))
		case <-n.closed:
			return 0, ErrClosed
		case <-time.After(n.cfg.HeartbeatTimeout / 10):
		}
	}
}

// readIndexLocal is the leader's half of a read.
func (n *Node) readIndexLocal(ctx context.Context) (uint64, error) {
	if n.r.State() != hraft.Leader {
		return 0, ErrNotLeader
	}
	term := n.r.CurrentTerm()
	if n.readyTerm.Load() != term {
		// Commit an entry of this term first: until then the commit index
		// may be behind what an earlier leader acknowledged.
		if err := n.awaitReady(ctx, term); err != nil {
			return 0, err
		}
	}
	idx := n.r.CommitIndex()
	if err := n.confirmTerm(ctx, term); err != nil {
		return 0, err
	}
	return idx, nil
}

// confirmTerm returns once a majority of the voters, this member counting,
// answered a request sent after it was called with a term no later than
// term (U12). A leader of a later term needs a majority that voted in it,
// and a member's term never goes back: so no write a later leader
// acknowledged before the call can exist, and the commit index this leader
// read before the call covers every acknowledged write. hashicorp/raft's
// VerifyLeader is not used for this: its heartbeat goroutine counts an
// answer for every verification waiting when the answer arrives, also
// those that began after the heartbeat was sent, so a leader paused with a
// heartbeat in flight resumes, reads the old answer and "verifies" a read
// that began after a new leader's writes.
func (n *Node) confirmTerm(ctx context.Context, term uint64) error {
	f := n.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	var others []hraft.Server
	voters, self := 0, false
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != hraft.Voter {
			continue
		}
		voters++
		if string(s.ID) == n.cfg.ID {
			self = true // its own term is term: it counts
		} else {
			others = append(others, s)
		}
	}
	need := voters/2 + 1
	if self {
		need--
	}
	if n.r.CurrentTerm() != term {
		return ErrNotLeader
	}
	if need <= 0 {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan bool, len(others))
	for _, s := range others {
		go func() {
			reply, err := n.caller.Call(transport.ExpectPeer(cctx, string(s.ID)), string(s.Address), methodTerm, nil)
			answers <- err == nil && len(reply) == 8 && binary.LittleEndian.Uint64(reply) <= term
		}()
	}
	for range others {
		select {
		case ok := <-answers:
			if ok {
				if need--; need == 0 {
					return nil
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("%w: a majority of the voters did not confirm term %d", ErrNotLeader, term)
}

// handleTerm answers a leader's confirmTerm: this member's current term.
func (n *Node) handleTerm(_ context.Context, _ []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, n.r.CurrentTerm()), nil
}

func waitFuture(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) handleReadIndex(ctx context.Context, _ []byte) ([]byte, error) {
	idx, err := n.readIndexLocal(ctx)
	if err != nil {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: err.Error()}
	}
	return binary.LittleEndian.AppendUint64(nil, idx), nil
}

// WaitApplied waits until the state machine has applied index i (entries
// raft does not hand to the state machine — no-ops, barriers — count once
// everything before them is applied).
func (n *Node) WaitApplied(ctx context.Context, i uint64) error { return n.waitApplied(ctx, i) }

// AppliedIndex returns the index whose state the state machine holds: the
// last entry it applied, or later when every entry since is one raft does
// not hand to it (a new leader's no-op, barriers) and raft has dispatched
// them. It is what readiness checks compare with the commit index.
func (n *Node) AppliedIndex() uint64 {
	a := n.fsm.applied.Load()
	// Bounded: a long run of barriers is reported once the state machine
	// applies the next command.
	if d := n.r.AppliedIndex(); d > a && d-a <= 4096 {
		if ok, err := n.onlySkippedBetween(a, d); err == nil && ok {
			return d
		}
	}
	return a
}

func (n *Node) waitApplied(ctx context.Context, idx uint64) error {
	for {
		changed := n.fsm.wait()
		a := n.fsm.applied.Load()
		if a >= idx {
			return nil
		}
		if n.r.AppliedIndex() >= idx {
			done, err := n.onlySkippedBetween(a, idx)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closed:
			return ErrClosed
		case <-time.After(5 * time.Millisecond): // raft's own progress is not notified
		}
	}
}

// onlySkippedBetween reports whether every entry in (a, idx] is one raft
// does not hand to the state machine, so the state at a is the state at idx.
func (n *Node) onlySkippedBetween(a, idx uint64) (bool, error) {
	for i := a + 1; i <= idx; i++ {
		var e hraft.Log
		err := n.log.GetLog(i, &e)
		if errors.Is(err, hraft.ErrLogNotFound) {
			continue // compacted into a snapshot the state already holds
		}
		if err != nil {
			return false, err
		}
		if e.Type == hraft.LogCommand || e.Type == hraft.LogConfiguration {
			return false, nil
		}
	}
	return true, nil
}

// readyFlight is the barrier a new leader commits once per term before its
// reads rely on the commit index. Every caller in that term shares it (the
// observer when the member takes office, and each read that arrives before
// it committed), so a leader change writes one barrier, not one per read
// waiting on the new leader.
type readyFlight struct {
	term uint64
	done chan struct{}
	err  error
}

// awaitReady returns once a barrier of term committed (readyTerm is then
// term, unless the term moved on meanwhile), or with its error, or ctx's.
// A failed barrier is not shared with later callers: the next one tries
// again.
func (n *Node) awaitReady(ctx context.Context, term uint64) error {
	n.readyMu.Lock()
	f := n.readyFl
	if f == nil || f.term != term {
		f = &readyFlight{term: term, done: make(chan struct{})}
		n.readyFl = f
		// Not in n.wg (a read may start it while Close waits); it ends
		// with n.life.
		go func() {
			f.err = waitFuture(n.closedCtx(), n.r.Barrier(n.cfg.ApplyTimeout))
			if f.err == nil && n.r.CurrentTerm() == term {
				n.readyTerm.Store(term)
			}
			if f.err != nil {
				n.readyMu.Lock()
				if n.readyFl == f {
					n.readyFl = nil
				}
				n.readyMu.Unlock()
			}
			close(f.done)
		}()
	}
	n.readyMu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
