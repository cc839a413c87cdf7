package raft

import (
	"context"
	"fmt"
	"sync"
)

// leaderWatch ends forwarded requests (proposals, read indexes) when the
// member learns of another leader than the one they were sent to. A request
// forwarded to a leader that froze (SIGSTOP, a long pause, a half-open
// connection) has no answer coming; without the watch it would wait for its
// context's deadline while the cluster already serves under a new leader.
// Ending it at once is safe: a read is asked again of the new leader, and a
// proposal's outcome becomes indeterminate (the old leader may still commit
// it): the caller retries under an idempotency key, and the job layer's is
// the job ID.
type leaderWatch struct {
	mu   sync.Mutex
	subs map[*forwarding]struct{}
}

// forwarding is one forwarded proposal in flight.
type forwarding struct {
	target string
	cancel context.CancelCauseFunc
}

// observe is called with every leader the member learns of ("" while it
// knows none). Every forwarding sent to another member ends.
func (w *leaderWatch) observe(leader string) {
	if leader == "" {
		return // no new leader known yet: the old one may still answer
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.subs {
		if f.target != leader {
			f.cancel(fmt.Errorf("%w: %s, after forwarding to %s", ErrLeaderChanged, clipID(leader), clipID(f.target)))
			delete(w.subs, f)
		}
	}
}

// forward returns a context derived from ctx that ends, with a cause
// matching ErrLeaderChanged, once the member learns of a leader other than
// target; done releases it. current is the leader as known right after
// registering (one learnt between the caller's read and the registration
// is not missed).
func (w *leaderWatch) forward(ctx context.Context, target string, current func() string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	f := &forwarding{target: target, cancel: cancel}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = make(map[*forwarding]struct{})
	}
	w.subs[f] = struct{}{}
	w.mu.Unlock()
	if l := current(); l != "" && l != target {
		w.observe(l)
	}
	return ctx, func() {
		w.mu.Lock()
		delete(w.subs, f)
		w.mu.Unlock()
		cancel(nil)
	}
}

// knownLeader returns the ID of the leader this member knows ("" if none).
func (n *Node) knownLeader() string {
	_, id := n.r.LeaderWithID()
	return string(id)
}

// clipID bounds a member ID in an error message.
func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}
