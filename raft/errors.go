package raft

import (
	"errors"
	"fmt"

	"github.com/jobraft/jobraft/transport"
)

// Proposal outcome classes. Every error returned by Node.Propose matches
// exactly one of ErrRejected and ErrIndeterminate (errors.Is), besides its
// cause.
var (
	// ErrRejected: the proposal was not committed and never will be: it was
	// refused before it reached a leader's log (no leader, not leader,
	// transfer in progress, queue full, request not delivered). Retrying is
	// safe.
	ErrRejected = errors.New("raft: proposal rejected; it was not committed")
	// ErrIndeterminate: the proposal may have been committed (leadership
	// lost after it was appended, timeout after sending, connection lost
	// before the reply). Retry only with an idempotency key.
	ErrIndeterminate = errors.New("raft: proposal outcome unknown; it may have been committed")
)

// Other errors.
var (
	// ErrNoLeader: no leader is known within the caller's deadline.
	ErrNoLeader = errors.New("raft: no leader")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("raft: node closed")
	// ErrNotLeader: an operation that must run on the leader reached a
	// member that is not (or no longer) the leader.
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrInvalidConfig: Config failed validation.
	ErrInvalidConfig = errors.New("raft: invalid config")
	// ErrTooLarge: the command exceeds Config.MaxCommandSize.
	ErrTooLarge = errors.New("raft: command too large")
	// ErrUnrestorable: Open found no snapshot it could restore that reaches
	// the first entry of the log (the newest snapshot failed verification
	// and the log was compacted past the older one). Starting would leave a
	// hole between state and log, so the member refuses to start; replace
	// it (remove its data dir and add it again) to have the leader send a
	// snapshot.
	ErrUnrestorable = errors.New("raft: no verified snapshot reaches the log's first index")
	// ErrNotVoter: TransferLeadership named a member that cannot lead (a
	// non-voter).
	ErrNotVoter = errors.New("raft: member is not a voter")
	// ErrRefusedAtSeam: an RPC refused by the reconcile seam, before raft
	// saw it (a stray TimeoutNow, docs/upstream.md). The sender's raft
	// receives it as the RPC's error.
	ErrRefusedAtSeam = errors.New("raft: refused at the reconcile seam")
	// ErrDiverged: this member diverged from its leader's log (Status.Diverged)
	// and refuses what would repair it in place: the snapshot store returns
	// it for every snapshot raft would create, taken or installed. Re-seed
	// the member (docs/node.md, "A diverged member").
	ErrDiverged = errors.New("raft: member diverged from the leader's log; re-seed it")
	// ErrCommittedDivergence: an InstallSnapshot whose last entry has
	// another term than the entry this member committed at that index (its
	// log or its latest snapshot). The seam refuses it (wrapped with
	// ErrRefusedAtSeam), the member is diverged (EventDiverged carries
	// it); nothing else changes.
	ErrCommittedDivergence = errors.New("raft: snapshot contradicts an entry this member committed")
	// ErrLeaderChanged: a proposal forwarded to the leader was still
	// unanswered when this member learned of another leader (the old one
	// froze, or lost its leadership). Propose returns it as the cause of an
	// ErrIndeterminate error: the old leader may still have committed it.
	// (A forward ended before its request was written is a rejection, which
	// Propose retries on the new leader itself.)
	ErrLeaderChanged = errors.New("raft: leader changed while a forwarded proposal was in flight")
	// ErrStalled: a member does not converge (the catch-up policy named a
	// reason: MemberProgress.Reason). AddMember returns it when it gives
	// up; the member stays a non-voter until it is removed or added again.
	ErrStalled = errors.New("raft: member does not converge")
	// ErrMemberDiverged: a member's log contradicts the leader's at or
	// below its commit floor; it is never promoted (re-seed it).
	ErrMemberDiverged = errors.New("raft: member diverged from the leader's log")
)

// ProposeError is the diagnostic of a failed proposal.
type ProposeError struct {
	Class  error  // ErrRejected or ErrIndeterminate
	Leader string // the leader it was sent to, "" if none
	Cause  error
}

func (e *ProposeError) Error() string {
	// A forwarded proposal's Leader is the address the call went to: the
	// call's error does not name it a second time.
	return fmt.Sprintf("%v (leader %q): %v", e.Class, e.Leader, transport.ElideAddr(e.Cause, e.Leader))
}

// Unwrap returns the class and the cause.
func (e *ProposeError) Unwrap() []error { return []error{e.Class, e.Cause} }

func rejected(leader string, cause error) error {
	return &ProposeError{Class: ErrRejected, Leader: leader, Cause: cause}
}

func indeterminate(leader string, cause error) error {
	return &ProposeError{Class: ErrIndeterminate, Leader: leader, Cause: cause}
}

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// UnrestorableError is the diagnostic of ErrUnrestorable (errors.As): the
// log's first index, the newest snapshot that passed verification (none:
// Verified is "") and the snapshots refused before it, newest first.
type UnrestorableError struct {
	FirstIndex    uint64
	Verified      string
	VerifiedIndex uint64
	Refused       []RefusedSnapshot
}

// RefusedSnapshot is a snapshot that failed verification when opened.
type RefusedSnapshot struct {
	ID    string
	Index uint64
	Err   error
}

func (e *UnrestorableError) Error() string {
	refused := make([]string, len(e.Refused))
	for i, r := range e.Refused {
		refused[i] = fmt.Sprintf("%s at %d (%v)", r.ID, r.Index, r.Err)
	}
	if e.Verified == "" {
		return fmt.Sprintf("%v: no verified snapshot, the log starts at %d (refused: %v)", ErrUnrestorable, e.FirstIndex, refused)
	}
	return fmt.Sprintf("%v: newest verified snapshot %s ends at index %d, the log starts at %d (refused: %v)",
		ErrUnrestorable, e.Verified, e.VerifiedIndex, e.FirstIndex, refused)
}

// Unwrap returns ErrUnrestorable.
func (e *UnrestorableError) Unwrap() error { return ErrUnrestorable }
