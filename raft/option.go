package raft

import (
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// An Option changes how Open wires the member's parts: instrumentation and
// fault seams for tests, below the member's own layers. This module's
// tests build them (internal/test/nodeopt); a host passes none, and nothing in
// a member's contract depends on them.
type Option func(*Wiring)

// Wiring is what Options may change. The zero value changes nothing.
type Wiring struct {
	// Transport, when set, wraps the member's raft transport; addr is the
	// member's advertised address. It sits below the member's own layers
	// (the replication meter, the campaign gate, the reconcile seam).
	Transport func(addr string, t hraft.Transport) hraft.Transport
	// Caller, when set, wraps the member's RPC caller; addr as above. It
	// sits below the member-identity check.
	Caller func(addr string, c transport.Caller) transport.Caller
	// WAL are passed to wal.Open after the member's own options.
	WAL []wal.Option
	// Snapshot are passed to snapshot.Open after the member's own options.
	Snapshot []snapshot.Option
	// Applied, when set, is told what the state machine is handed.
	Applied AppliedObserver
}

// AppliedObserver is told, in order, what a member's state machine was
// handed: its applied history. Started is called by Open; Applied and
// Restored on the state machine's goroutine, where they must not block for
// long.
type AppliedObserver interface {
	// Started: the member opens, before it restores its latest snapshot
	// (its state machine is empty).
	Started()
	// Applied: a batch raft handed the state machine (commands and
	// configurations; raft applies no-ops and barriers itself), after the
	// batch was applied and before the member's applied index moves. The
	// entries are raft's and valid only during the call.
	Applied(entries []*hraft.Log)
	// Restored: the state machine was replaced by a snapshot of applied
	// index index (on start, or an install from the leader).
	Restored(index uint64)
}

// wiring collects opts in order.
func wiring(opts []Option) Wiring {
	var w Wiring
	for _, opt := range opts {
		opt(&w)
	}
	return w
}
