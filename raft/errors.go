package raft

import (
	"errors"
	"fmt"
	"strings"
	"time"

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
	// ErrNoLeader: no leader was reached: none known when the caller's
	// context ended, or none reached within Config.LeaderWait (then the
	// error is a *NoLeaderError saying what this member could reach). A
	// proposal that fails with it was not committed (ErrRejected).
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
	// ErrClusterMismatch: a join between members of different clusters
	// (Config.ClusterID) was refused: by the leader, before adding the
	// member (AddMember returns it; nothing changed), or by the joining
	// member, which takes no append or snapshot from a leader of another
	// cluster (Status.ClusterRefused, EventClusterMismatch). The
	// diagnostic is a *ClusterMismatchError naming both IDs.
	ErrClusterMismatch = errors.New("raft: cluster ID mismatch")
	// ErrMemberUnreachable: AddMember could not ask the member to add for
	// its cluster ID (the leader has a Config.ClusterID): it is not
	// running at the address given, or does not answer. Nothing changed.
	ErrMemberUnreachable = errors.New("raft: member to add does not answer")
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

// NoLeaderError is the diagnostic of an operation that reached no leader
// within Config.LeaderWait (errors.As); it matches ErrNoLeader. What it
// says of the voters is what this member found when it gave up: each
// voter of its latest configuration was asked for its status, and those
// that answered (this member counting) are Reachable.
type NoLeaderError struct {
	// Waited is how long the operation waited for a leader.
	Waited time.Duration
	// Self is this member's ID; Leader the leader it knew when it gave up
	// ("" none: an election without a winner, or too few voters to win
	// one), which did not take or answer the request.
	Self, Leader string
	// Voters are the voters of this member's latest configuration;
	// Reachable those that answered (this member, if a voter, included).
	Voters, Reachable []string
	// Last is the last attempt's error (nil if there was none).
	Last error
}

func (e *NoLeaderError) Error() string {
	var b strings.Builder
	b.WriteString("raft: no leader")
	switch {
	case e.Leader == e.Self && e.Leader != "":
		fmt.Fprintf(&b, " reached: this member (%s) leads but a quorum did not confirm it", clipID(e.Self))
	case e.Leader != "":
		fmt.Fprintf(&b, " reached: leader %s did not answer", clipID(e.Leader))
	}
	if len(e.Voters) == 0 {
		b.WriteString(": this member is in no configuration (not added yet, or removed)")
	} else {
		quorum := len(e.Voters)/2 + 1
		fmt.Fprintf(&b, ": %d of %d voters reachable", len(e.Reachable), len(e.Voters))
		if len(e.Reachable) < quorum {
			fmt.Fprintf(&b, ", a quorum needs %d", quorum)
		} else if e.Leader == "" {
			b.WriteString(" (a quorum: an election is under way)")
		}
		if missing := e.unreachable(); len(missing) > 0 {
			fmt.Fprintf(&b, "; not answering: %s", strings.Join(missing, ", "))
		}
	}
	fmt.Fprintf(&b, " (waited %v", e.Waited.Round(time.Millisecond))
	if e.Last != nil && e.Leader != "" {
		fmt.Fprintf(&b, "; last error: %v", e.Last)
	}
	b.WriteString(")")
	return b.String()
}

// unreachable lists the voters not in Reachable.
func (e *NoLeaderError) unreachable() []string {
	var out []string
	for _, v := range e.Voters {
		found := false
		for _, r := range e.Reachable {
			found = found || r == v
		}
		if !found {
			out = append(out, clipID(v))
		}
	}
	return out
}

// Unwrap returns ErrNoLeader.
func (e *NoLeaderError) Unwrap() error { return ErrNoLeader }

// ClusterMismatchError is the diagnostic of ErrClusterMismatch (errors.As).
type ClusterMismatchError struct {
	// Leader is true on the leader's side (the member was not added),
	// false on the joining member's (the sender's appends are refused).
	Leader bool
	// Member is the member to add (leader's side) or this member (joining
	// side); Sender the member whose appends were refused (joining side).
	Member, Sender string
	// Address is the member's (leader's side) or the sender's address.
	Address string
	// Cluster is this member's cluster ID, Other the other side's.
	Cluster, Other string
}

func (e *ClusterMismatchError) Error() string {
	if e.Leader {
		return fmt.Sprintf("%v: member %s at %s belongs to cluster %q, this cluster is %q: not added",
			ErrClusterMismatch, clipID(e.Member), e.Address, e.Other, e.Cluster)
	}
	return fmt.Sprintf("%v: %s at %s belongs to cluster %q, this member (%s) was started for cluster %q: its appends are refused",
		ErrClusterMismatch, clipID(e.Sender), e.Address, e.Other, clipID(e.Member), e.Cluster)
}

// Unwrap returns ErrClusterMismatch.
func (e *ClusterMismatchError) Unwrap() error { return ErrClusterMismatch }
