package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
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
//
// A forwarded proposal also ends once its lapse (the proposal's start plus
// Config.LeaderWait) has passed while the member knows no leader: without
// a quorum no new leader is ever learnt, and a proposal forwarded to a
// leader that then froze would otherwise wait for its context's deadline.
type leaderWatch struct {
	mu   sync.Mutex
	subs map[*forwarding]struct{}
}

// forwarding is one forwarded proposal in flight.
type forwarding struct {
	target string
	cancel context.CancelCauseFunc
	lapse  time.Time // zero: none
}

// observe is called with every leader the member learns of ("" while it
// knows none). Every forwarding sent to another member ends; with none
// known, every forwarding past its lapse (before it, the old leader may
// still answer).
func (w *leaderWatch) observe(leader string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for f := range w.subs {
		switch {
		case leader != "" && f.target != leader:
			f.cancel(fmt.Errorf("%w: %s, after forwarding to %s", ErrLeaderChanged, clipID(leader), clipID(f.target)))
		case leader == "" && !f.lapse.IsZero() && !now.Before(f.lapse):
			f.cancel(lapsed(f.target))
		default:
			continue
		}
		delete(w.subs, f)
	}
}

// errLapsed marks a forwarding ended by its lapse.
var errLapsed = errors.New("no leader known since")

func lapsed(target string) error {
	return fmt.Errorf("%w (%w the lapse of forwarding to %s)", ErrLeaderChanged, errLapsed, clipID(target))
}

// forward returns a context derived from ctx that ends, with a cause
// matching ErrLeaderChanged, once the member learns of a leader other than
// target; done releases it. current is the leader as known right after
// registering (one learnt between the caller's read and the registration
// is not missed). A non-zero lapse also ends it, with a cause matching
// ErrLeaderChanged, when the member knows no leader at or after lapse.
func (w *leaderWatch) forward(ctx context.Context, target string, current func() string, lapse time.Time) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	f := &forwarding{target: target, cancel: cancel, lapse: lapse}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = make(map[*forwarding]struct{})
	}
	w.subs[f] = struct{}{}
	w.mu.Unlock()
	if l := current(); l != "" && l != target {
		w.observe(l)
	}
	var timer *time.Timer
	if !lapse.IsZero() {
		// At the lapse, a member that knows no leader then ends it; one
		// that learns none later ends it in observe.
		timer = time.AfterFunc(time.Until(lapse), func() {
			if current() == "" {
				w.observe("")
			}
		})
	}
	return ctx, func() {
		if timer != nil {
			timer.Stop()
		}
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
