package raft

import (
	"sync"
	"time"
)

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventLeaderChange     EventKind = "leader_change"     // Leader, Term
	EventRoleChange       EventKind = "role_change"       // Role
	EventGuardRefusal     EventKind = "guard_refusal"     // Err (a *wal.GuardError)
	EventSnapshotSealed   EventKind = "snapshot_sealed"   // Index, Term
	EventSnapshotRejected EventKind = "snapshot_rejected" // Err (a *snapshot.GateError, or ErrDiverged with Index, Term)
	EventMemberAdded      EventKind = "member_added"      // Member
	EventMemberRemoved    EventKind = "member_removed"    // Member
	EventDiverged         EventKind = "diverged"          // Divergence, Index, Term (the leader's), Leader, Err (the refusal)
	EventLogFailed        EventKind = "log_failed"        // Err (wal.ErrFailed wrapping the class; never payload)
	EventClusterMismatch  EventKind = "cluster_mismatch"  // Leader (the sender refused), Err (a *ClusterMismatchError); once per sender and cluster ID
	EventRemoved          EventKind = "removed"           // Member (this one), Leader (whose configuration dropped it, "" if its own), Index; once (Status.Removed)
	// The leader's catch-up monitor (Progress is the member's line):
	EventMemberPromoted EventKind = "member_promoted" // Member, Progress: a candidate became a voter
	EventMemberStalled  EventKind = "member_stalled"  // Member, Progress (Reason, Detail), Err (ErrStalled)
	EventMemberDiverged EventKind = "member_diverged" // Member, Progress (Divergence), Index, Term (the leader's), Err (ErrMemberDiverged)
)

// Event is one thing that happened on this member.
type Event struct {
	Kind   EventKind
	Time   time.Time
	Leader string // leader ID for leader changes ("" when there is none)
	Term   uint64
	Role   string
	Index  uint64
	Member Member
	Err    error
	// Divergence is set for EventDiverged (published once per divergence,
	// not per refused retry).
	Divergence *Divergence
	// Progress is set for the catch-up monitor's events.
	Progress *MemberProgress
}

// eventHub fans events out to subscribers. A slow subscriber loses events
// (counted), never blocks the node.
type eventHub struct {
	mu      sync.Mutex
	subs    map[chan Event]struct{}
	dropped uint64
	closed  bool
}

func newEventHub() *eventHub { return &eventHub{subs: map[chan Event]struct{}{}} }

func (h *eventHub) publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			h.dropped++
		}
	}
}

func (h *eventHub) subscribe(buf int) (<-chan Event, func()) {
	ch := make(chan Event, buf)
	h.mu.Lock()
	if h.closed {
		close(ch)
		h.mu.Unlock()
		return ch, func() {}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
		h.mu.Unlock()
	}
}

func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		close(ch)
		delete(h.subs, ch)
	}
}
