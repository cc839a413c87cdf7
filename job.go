package jobraft

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Job is a job as queries and results return it (see fsm.Job). Its slices
// are the caller's own: writing into them changes nothing in any member.
type Job = fsm.Job

// State is a job's lifecycle state (see fsm.State).
type State = fsm.State

// Job states.
const (
	StatePending   = fsm.StatePending
	StateScheduled = fsm.StateScheduled
	StateRunning   = fsm.StateRunning
	StateSucceeded = fsm.StateSucceeded
	StateDead      = fsm.StateDead
	StateCanceled  = fsm.StateCanceled
	// StateWaiting: waiting for its parents (SubmitRequest.After) to
	// succeed; not claimable.
	StateWaiting = fsm.StateWaiting
)

// ParentPolicy is what a parent's failure does to a waiting dependent
// (SubmitRequest.OnParentFailure; see fsm.ParentPolicy).
type ParentPolicy = fsm.ParentPolicy

// Parent policies.
const (
	ParentFailCancel = fsm.ParentFailCancel // the dependent is canceled (the default)
	ParentFailDead   = fsm.ParentFailDead   // the dependent is dead
)

// LeaseEnd is how a job's last ended lease ended (Job.LastLease; see
// fsm.LeaseEnd).
type LeaseEnd = fsm.LeaseEnd

// EndKind says what ended a lease.
type EndKind = fsm.EndKind

// How a lease ends.
const (
	EndAcked    = fsm.EndAcked
	EndNaked    = fsm.EndNaked
	EndTermed   = fsm.EndTermed
	EndExpired  = fsm.EndExpired
	EndCanceled = fsm.EndCanceled
)

// NewID returns a new job ID: 26 characters of Crockford base32 encoding a
// millisecond timestamp (so IDs sort by creation time on one host) and 80
// random bits.
func NewID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	var s [26]byte
	for i := 25; i >= 0; i-- {
		s[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(s[:])
}
