package raft

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/catchup"
)

// methodProgress is the catch-up monitor's progress RPC: a member's own
// report of where its log stands (cheaper than the status RPC: no digest,
// no configuration).
const methodProgress = "jr.progress"

// progressReport is a member's answer to the progress RPC.
type progressReport struct {
	Role           string      `json:"role"`
	Term           uint64      `json:"term"`
	LastIndex      uint64      `json:"last_index"` // raft's (cached) last index
	LastTerm       uint64      `json:"last_term"`
	CommitIndex    uint64      `json:"commit_index"`
	AppliedIndex   uint64      `json:"applied_index"`
	Floor          uint64      `json:"floor"`
	PersistedFloor uint64      `json:"persisted_floor"`
	GuardRefusals  uint64      `json:"guard_refusals"`
	Diverged       *Divergence `json:"diverged,omitempty"`
}

func (n *Node) progressReport() progressReport {
	last, lastTerm := n.lastEntry()
	return progressReport{
		Role: n.r.State().String(), Term: n.r.CurrentTerm(),
		LastIndex: last, LastTerm: lastTerm,
		CommitIndex: n.r.CommitIndex(), AppliedIndex: n.AppliedIndex(),
		Floor: n.log.Floor(), PersistedFloor: n.log.PersistedFloor(),
		GuardRefusals: n.guardRefusals.Load(), Diverged: n.div.current(),
	}
}

func (n *Node) handleProgress(_ context.Context, _ []byte) ([]byte, error) {
	return json.Marshal(n.progressReport())
}

// progressOf asks the member at addr for its progress report.
func (n *Node) progressOf(ctx context.Context, addr string) (progressReport, error) {
	reply, err := n.caller.Call(ctx, addr, methodProgress, nil)
	if err != nil {
		return progressReport{}, err
	}
	var p progressReport
	if err := json.Unmarshal(reply, &p); err != nil {
		return progressReport{}, fmt.Errorf("raft: progress reply from %s: %w", addr, err)
	}
	return p, nil
}

// Catch-up states of a member, as the leader's monitor sees it
// (MemberProgress.State).
const (
	StateLeader     = "leader"      // this member, leading
	StateCaughtUp   = "caught_up"   // holds the leader's log
	StateCatchingUp = "catching_up" // behind, converging (a candidate in a round, or a lagging member)
	StateStalled    = "stalled"     // not converging: see Reason
	StateDiverged   = "diverged"    // its log contradicts the leader's at or below its commit floor
)

// MemberProgress is one member's catch-up state as the leader's monitor
// sees it (Status.Progress, on the leader only).
type MemberProgress struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// Voter is the member's suffrage; Candidate: a non-voter this leader
	// was asked to add, promoted by the catch-up policy.
	Voter     bool `json:"voter"`
	Candidate bool `json:"candidate,omitempty"`
	// Role is the member's own (Leader, Follower, Candidate), from its last
	// progress report ("" when none came).
	Role string `json:"role"`
	// State is one of the State* constants; Reason (a catchup.Reason) and
	// Detail say why a member is stalled or diverged.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Round and RoundTarget: a candidate's current catch-up round.
	Round       int    `json:"round,omitempty"`
	RoundTarget uint64 `json:"round_target,omitempty"`
	// LastIndex and AppliedIndex as the member last reported them; Lag is
	// the leader's last index minus LastIndex.
	LastIndex    uint64    `json:"last_index"`
	AppliedIndex uint64    `json:"applied_index"`
	Lag          uint64    `json:"lag"`
	LastContact  time.Time `json:"last_contact"`
	// The stream: entries per second the member's log advances, bytes per
	// second the leader sends it (appends and snapshots).
	EntriesPerSecond float64 `json:"entries_per_second"`
	BytesPerSecond   float64 `json:"bytes_per_second"`
	// A snapshot being streamed: its size and what remains of it.
	Installing             bool   `json:"installing,omitempty"`
	SnapshotSize           uint64 `json:"snapshot_size,omitempty"`
	SnapshotBytesRemaining uint64 `json:"snapshot_bytes_remaining,omitempty"`
	// SnapshotBytesSent counts every snapshot byte sent to the member.
	SnapshotBytesSent uint64 `json:"snapshot_bytes_sent"`
	// ETA estimates when the member holds the leader's log at the current
	// rates (0: nothing remains; -1: unknown).
	ETA time.Duration `json:"eta"`
	// Divergence is set when the member is diverged.
	Divergence *catchup.Divergence `json:"divergence,omitempty"`
}

// selfProgress is the leader's own line in Status.Progress.
func (n *Node) selfProgress() MemberProgress {
	last := n.r.LastIndex()
	return MemberProgress{ID: n.cfg.ID, Address: n.mux.Addr(), Voter: n.isVoter(n.r), Role: hraft.Leader.String(),
		State: StateLeader, LastIndex: last, AppliedIndex: n.AppliedIndex(), LastContact: time.Now()}
}
