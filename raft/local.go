package raft

import (
	"context"

	hraft "github.com/hashicorp/raft"
)

// ProposeOnLeader proposes cmd only if this member is the leader in term
// (0: any term), and never forwards it. It is for leader duties whose
// command carries leader-local facts (the job controller's expire command
// carries the time this member took office, on its own clock): forwarded to
// another leader, or proposed in a later term of this member, such a
// command would be stamped with a clock or term it does not belong to.
//
// When this member is not the leader of term, it returns an error matching
// ErrRejected and ErrNotLeader without proposing. Otherwise the outcome
// classes are Propose's. A leadership change between the check and the
// append is refused by hashicorp/raft (ErrNotLeader, rejected); losing and
// regaining leadership inside that window is not detected here — a command
// for which that matters carries its term and the state machine compares it
// with the entry's (fsm.ExpireCmd.Term does).
func (n *Node) ProposeOnLeader(ctx context.Context, term uint64, cmd []byte) (Result, error) {
	if n.isClosed() {
		return Result{}, rejected("", ErrClosed)
	}
	if n.r.State() != hraft.Leader || (term != 0 && n.r.CurrentTerm() != term) {
		return Result{}, rejected("", ErrNotLeader)
	}
	return n.proposeLocal(ctx, cmd)
}
