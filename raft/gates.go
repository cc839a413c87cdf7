package raft

import (
	"fmt"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// The gates keep a diverged member (diverged.go) out of the cluster's way
// until an operator re-seeds it.

// campaignGate wraps the member's outbound raft transport: while the member
// is diverged, its own vote and pre-vote requests are answered "not
// granted" locally, never sent. It cannot win an election and push the
// entry the leader lacks onto the others; it still votes for others (its
// replies are not outbound requests), so it does not cost the cluster its
// quorum. Everything else passes through.
type campaignGate struct {
	hraft.Transport
	diverged func() bool
}

// campaignGatePreVote is campaignGate over a transport with pre-vote.
type campaignGatePreVote struct{ campaignGate }

var (
	_ hraft.Transport   = campaignGate{}
	_ hraft.WithClose   = campaignGate{}
	_ hraft.WithPreVote = campaignGatePreVote{}
	_ hraft.WithClose   = campaignGatePreVote{}
)

// gateCampaigns wraps t. The result implements hraft.WithPreVote if and
// only if t does (raft turns pre-vote off without it), and hraft.WithClose.
func gateCampaigns(t hraft.Transport, diverged func() bool) hraft.Transport {
	g := campaignGate{Transport: t, diverged: diverged}
	if _, ok := t.(hraft.WithPreVote); ok {
		return campaignGatePreVote{g}
	}
	return g
}

// RequestVote implements hraft.Transport.
func (g campaignGate) RequestVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestVoteRequest, resp *hraft.RequestVoteResponse) error {
	if g.diverged() {
		*resp = hraft.RequestVoteResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: args.ProtocolVersion}, Term: args.Term, Granted: false}
		return nil
	}
	return g.Transport.RequestVote(id, target, args, resp)
}

// RequestPreVote implements hraft.WithPreVote.
func (g campaignGatePreVote) RequestPreVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	if g.diverged() {
		*resp = hraft.RequestPreVoteResponse{RPCHeader: hraft.RPCHeader{ProtocolVersion: args.ProtocolVersion}, Term: args.Term, Granted: false}
		return nil
	}
	return g.Transport.(hraft.WithPreVote).RequestPreVote(id, target, args, resp)
}

// Close implements hraft.WithClose: it closes the wrapped transport if that
// can be closed (raft's Shutdown relies on it).
func (g campaignGate) Close() error {
	if c, ok := g.Transport.(hraft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// snapshotGate wraps the snapshot store raft writes to: while the member is
// diverged, no snapshot is created — neither one the leader installs
// (which would replace the member's log and state with the leader's, a
// silent repair) nor one of its own (whose compaction could remove the
// divergent entry an operator needs to see); refused is told of each one.
// Reads pass through.
type snapshotGate struct {
	*snapshot.Store
	diverged func() bool
	refused  func(index, term uint64, err error)
}

var _ hraft.SnapshotStore = snapshotGate{}

// Create implements hraft.SnapshotStore.
func (g snapshotGate) Create(version hraft.SnapshotVersion, index, term uint64, configuration hraft.Configuration,
	configurationIndex uint64, trans hraft.Transport) (hraft.SnapshotSink, error) {
	if g.diverged() {
		err := fmt.Errorf("%w: snapshot at index %d term %d refused", ErrDiverged, index, term)
		if g.refused != nil {
			g.refused(index, term, err)
		}
		return nil, err
	}
	return g.Store.Create(version, index, term, configuration, configurationIndex, trans)
}
