package raft

import (
	"context"
	"encoding/json"
	"fmt"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// Status is one member's view of itself and the cluster.
type Status struct {
	ID             string   `json:"id"`
	Address        string   `json:"address"`
	Role           string   `json:"role"` // Leader, Follower, Candidate, Shutdown
	Term           uint64   `json:"term"`
	LeaderID       string   `json:"leader_id"`
	LeaderAddress  string   `json:"leader_address"`
	FirstIndex     uint64   `json:"first_index"` // first entry in the log (0: empty)
	LastIndex      uint64   `json:"last_index"`
	LastTerm       uint64   `json:"last_term"`
	CommitIndex    uint64   `json:"commit_index"`
	AppliedIndex   uint64   `json:"applied_index"` // state held by the state machine (Node.AppliedIndex)
	Floor          uint64   `json:"floor"`
	PersistedFloor uint64   `json:"persisted_floor"`
	Digest         Digest   `json:"digest"`
	Members        []Member `json:"members"`
	// ClusterID is Config.ClusterID ("" if none).
	ClusterID string `json:"cluster_id,omitempty"`
	// Removed is set once this member found it was removed from the
	// cluster (removed.go): it takes no further part, and its host should
	// stop it. It stays set until the member stops.
	Removed *Removal `json:"removed,omitempty"`
	// ClusterRefused is set while this member, waiting to be added, refuses
	// the appends of a leader of another cluster (ErrClusterMismatch): the
	// refusal, naming both IDs. It is cleared once a leader of its own
	// cluster is checked.
	ClusterRefused string `json:"cluster_refused,omitempty"`
	// Progress is, on the leader only, every member's catch-up state as
	// its monitor sees it (this member first among them by ID order, as
	// StateLeader); nil on other members.
	Progress []MemberProgress `json:"progress,omitempty"`
	// GuardRefusals counts the guard's refusals since the member started.
	GuardRefusals uint64 `json:"guard_refusals"`
	// Diverged is set once the leader asked this member to cut entries at
	// or below its commit floor (see Divergence); nil otherwise. It stays
	// set until the member stops.
	Diverged *Divergence `json:"diverged,omitempty"`
	// LogFailed is set once this member's log failed closed (a write or
	// fsync error, a full disk: wal.ErrFailed) to the failure's class
	// (wal.FailSync, wal.FailWrite, wal.FailNoSpace); "" otherwise. The
	// member keeps running, but as a follower that never stores another
	// entry (it cannot converge) until it is restarted on a healthy disk.
	LogFailed string `json:"log_failed,omitempty"`
	// Seam counts what the reconcile seam corrected since the member
	// started (docs/upstream.md).
	Seam SeamCounters `json:"seam"`
	// IdentityRefused counts connections, raft requests and calls refused
	// since the member started because a peer's certificate named no
	// member, or another member than claimed or expected (TLS only;
	// docs/transport.md, "Member identity").
	IdentityRefused transport.IdentityStats `json:"identity_refused"`
}

// SeamCounters count the reconcile seam's corrections of hashicorp/raft.
type SeamCounters struct {
	// CommitClamps: appends whose leader commit index was lowered to the
	// last entry the append verified (U1).
	CommitClamps uint64 `json:"commit_clamps"`
	// HeartbeatsRerouted: heartbeats that could change the member's term
	// or role, handled by raft's main loop instead of its fast path (U6).
	HeartbeatsRerouted uint64 `json:"heartbeats_rerouted"`
	// TimeoutNowRefused: TimeoutNow requests not from the current leader,
	// or to a member that is not a voting follower (U5).
	TimeoutNowRefused uint64 `json:"timeout_now_refused"`
	// AppendsRefused: appends refused whole because the guard would refuse
	// their entries after raft had truncated the conflicting suffix (U4),
	// or because an entry was nil (hashicorp/raft would panic).
	AppendsRefused uint64 `json:"appends_refused"`
	// InstallsAnswered: snapshot installs answered without restoring,
	// because the member holds the snapshot's last entry (U2, Figure 13
	// step 6); InstallsDeferred: refused until raft adopts the sender's
	// higher term; InstallsBehind: at or below the floor but past what the
	// member can continue from, refused and a newer snapshot asked for;
	// InstallsDiverged: another term at a committed index, refused loudly.
	InstallsAnswered uint64 `json:"installs_answered"`
	InstallsDeferred uint64 `json:"installs_deferred"`
	InstallsBehind   uint64 `json:"installs_behind"`
	InstallsDiverged uint64 `json:"installs_diverged"`
	// Installs past the commit floor (seam_terms.go): InstallsVerified,
	// checked against the sender's term at the floor and handed to raft;
	// InstallsUnverified, handed to raft unchecked because a side did not
	// know its term at the floor; InstallsUnasked, refused because the
	// sender's term index could not be read (the leader retries). A
	// contradiction at the floor counts in InstallsDiverged.
	InstallsVerified   uint64 `json:"installs_verified"`
	InstallsUnverified uint64 `json:"installs_unverified"`
	InstallsUnasked    uint64 `json:"installs_unasked"`
	// While raft's cached last index was stale (U3): appends at it refused,
	// votes refused to candidates behind the member's real log, and the
	// member's own (pre-)vote requests not sent.
	StaleAppendsRefused   uint64 `json:"stale_appends_refused"`
	StaleVotesRefused     uint64 `json:"stale_votes_refused"`
	StaleCampaignsRefused uint64 `json:"stale_campaigns_refused"`
	// StickinessLifted: vote requests handed to raft, and pre-votes the
	// seam answered, without raft's leader stickiness, because the member
	// had not heard from its leader for its heartbeat timeout (U13);
	// counted whether raft, or the pre-vote rule, then granted them or not.
	StickinessLifted uint64 `json:"stickiness_lifted"`
}

// Status returns this member's status.
func (n *Node) Status() Status {
	addr, id := n.r.LeaderWithID()
	first, _ := n.log.FirstIndex()
	last, lastTerm := n.lastEntry()
	s := Status{
		ID: n.cfg.ID, Address: n.mux.Addr(), Role: n.r.State().String(), Term: n.r.CurrentTerm(),
		LeaderID: string(id), LeaderAddress: string(addr),
		FirstIndex: first, LastIndex: last, LastTerm: lastTerm,
		CommitIndex: n.r.CommitIndex(), AppliedIndex: n.AppliedIndex(),
		Floor: n.log.Floor(), PersistedFloor: n.log.PersistedFloor(),
		Digest: n.sm.Digest(), Diverged: n.div.current(), LogFailed: n.log.Failure(),
		Seam:            n.seamCounters(),
		IdentityRefused: n.mux.IdentityStats(),
		Progress:        n.mon.progress(), GuardRefusals: n.guardRefusals.Load(),
		ClusterID: n.cfg.ClusterID, Removed: n.removal.seen.Load(),
	}
	if e := n.join.refused.Load(); e != nil {
		s.ClusterRefused = e.Error()
	}
	if f := n.r.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			s.Members = append(s.Members, Member{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == hraft.Voter})
		}
	}
	return s
}

// lastEntry is raft's last index (it counts a snapshot installed after the
// log was reset) and its term: the log's own entry's when it holds it, else
// the snapshot's when the index is the snapshot's (else 0).
func (n *Node) lastEntry() (index, term uint64) {
	index = n.r.LastIndex()
	var e hraft.Log
	if n.log.GetLog(index, &e) == nil {
		return index, e.Term
	}
	if st := statsOf(n.r); st.LastSnapshotIndex == index {
		return index, st.LastSnapshotTerm
	}
	return index, 0
}

// StatusOf asks the member at addr for its status over the status RPC.
// Under TLS, when the configuration names a member at addr, the server's
// certificate must name that member (else transport.ErrWrongMember).
func (n *Node) StatusOf(ctx context.Context, addr string) (Status, error) {
	reply, err := n.caller.Call(ctx, addr, methodStatus, nil)
	if err != nil {
		return Status{}, err
	}
	var s Status
	if err := json.Unmarshal(reply, &s); err != nil {
		return Status{}, fmt.Errorf("raft: status reply from %s: %w", addr, err)
	}
	return s, nil
}

func (n *Node) handleStatus(_ context.Context, _ []byte) ([]byte, error) {
	return json.Marshal(n.Status())
}

func (n *Node) seamCounters() SeamCounters {
	return SeamCounters{
		CommitClamps: n.seam.clamps.Load(), HeartbeatsRerouted: n.seam.rerouted.Load(), TimeoutNowRefused: n.seam.strayTimeouts.Load(),
		AppendsRefused:   n.seam.appendsRefused.Load(),
		InstallsAnswered: n.seam.answered.Load(), InstallsDeferred: n.seam.deferred.Load(),
		InstallsBehind: n.seam.behind.Load(), InstallsDiverged: n.seam.diverged.Load(),
		InstallsVerified: n.seam.verified.Load(), InstallsUnverified: n.seam.unverified.Load(), InstallsUnasked: n.seam.unasked.Load(),
		StaleAppendsRefused: n.seam.staleAppends.Load(), StaleVotesRefused: n.seam.staleVotes.Load(),
		StaleCampaignsRefused: n.seam.campaigns.Load(), StickinessLifted: n.seam.unstuck.Load(),
	}
}
