package fsm

import (
	"io"
	"time"
)

// Entry is one committed command, handed to Jobs.Apply in log order. It has
// the fields of raft.Entry, the contract's entry (the controller converts one
// to the other); this package does not depend on raft.
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
