package raft

import (
	"io"
	"time"
)

// The state-machine contract: what a Node replicates. raft owns it (as
// hashicorp/raft owns its FSM); the job state machine (package fsm) rides
// on it through the controller, and tests use small machines of their own.

// Entry is one committed command, handed to StateMachine.Apply in log order.
type Entry struct {
	// Index is the raft index of the entry. It is unique and strictly
	// increasing across Apply calls; state machines may use it as a fencing
	// token (the job state machine does).
	Index uint64
	// Term is the raft term the entry was proposed in.
	Term uint64
	// Time is the leader's clock when it proposed the entry. It is the only
	// notion of time a state machine may use: Apply must never read a clock.
	Time time.Time
	// Cmd is the command as the proposer encoded it. The slice is owned by
	// the caller and is only valid during Apply: copy what you keep.
	Cmd []byte
}

// StateMachine is the contract every replicated state machine implements to
// ride on a Node.
//
// Determinism: Apply must be a pure function of the current state and the
// entry. It must not read a clock, draw random numbers, depend on map
// iteration order, or do IO. Two instances that applied the same entries in
// the same order must report equal digests.
//
// Concurrency: the node calls Apply, Snapshot and Restore from one goroutine,
// never concurrently with each other. Digest, and any query methods a state
// machine adds, may be called from any goroutine at any time, concurrently
// with Apply.
type StateMachine interface {
	// Apply applies one committed command and returns its result, encoded by
	// the state machine (the proposer decodes it). Invalid commands must be
	// answered with a rejection result and leave the state unchanged; Apply
	// must never panic on its input.
	Apply(e Entry) []byte

	// Snapshot captures the state as of the last applied entry. It must be
	// cheap (copy-on-write): the returned Snapshot is persisted on another
	// goroutine while Apply continues, and must still describe exactly the
	// state at the moment Snapshot was called.
	Snapshot() (Snapshot, error)

	// Restore replaces the whole state with the one read from r. It must
	// read r to io.EOF and validate the input completely before replacing
	// anything: on error the previous state is kept unchanged. (The
	// snapshot store verifies the stream as it is read and reports a
	// corrupt one only at its end, instead of its final bytes.)
	Restore(r io.Reader) error

	// Digest summarises the state as of the last applied entry. Members that
	// applied the same entries have equal digests.
	Digest() Digest
}

// Snapshot is a point-in-time copy of a state machine's state.
type Snapshot interface {
	// Persist writes the snapshot to w. It runs concurrently with Apply.
	Persist(w io.Writer) error
	// Release is called when the snapshot is no longer needed.
	Release()
}

// Digest identifies a state machine's state at an applied index.
type Digest struct {
	// Index is the raft index of the last entry the state machine applied
	// (0 before any).
	Index uint64
	// Sum is a hash of the whole state at Index.
	Sum [32]byte
}
