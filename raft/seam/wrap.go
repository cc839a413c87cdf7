package seam

import (
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/bugs"
)

// Wrap wraps the raft transport a member hands to hashicorp/raft so that
// every incoming RPC passes one place before raft sees it: the reconcile
// seam. There the member corrects the rules hashicorp/raft v1.7.3 bends
// (docs/upstream.md). The transport itself applies one, always:
//
// The Raft paper's Figure 2 lets a follower advance its commit index to
// min(leaderCommit, index of the last new entry) — the last entry this very
// append verified against the leader's log. hashicorp/raft uses
// min(leaderCommit, its own last index) instead, and its leader reads the
// commit index separately from the range it replicates, so an append with
// PrevLogEntry N, no entries and LeaderCommitIndex ≥ N+1 is real. A deposed
// leader still holding an uncommitted entry N+1 of its old term passes the
// prev check, "commits" N+1 and applies an entry the cluster never
// committed. Wrap clamps LeaderCommitIndex to PrevLogEntry + len(Entries)
// (a log is contiguous, so that is the index of the last verified entry),
// on the RPC consumer and on the heartbeat fast path alike (U1).
//
// The rest is the member's policy, given as hooks (Hooks): it may
// answer an RPC itself instead of raft (Intercept), and decide which
// heartbeats may take hashicorp/raft's fast path — which runs raft's
// handler on the connection's goroutine, outside raft's main loop — and
// which must go through the consumer like every other RPC (FastPath).
//
// Everything else — sending, pipelines, pre-vote, Close — is the inner
// transport's own; Wrap keeps raft.WithPreVote when inner has it (raft
// enables pre-vote only then) and raft.WithClose.
func Wrap(inner raft.Transport, hooks Hooks) raft.Transport {
	s := &seam{inner: inner, hooks: hooks, out: make(chan raft.RPC), stop: make(chan struct{})}
	go s.forward()
	if _, ok := inner.(raft.WithPreVote); ok {
		return seamPreVote{s}
	}
	return s
}

// Hooks is the member's policy at the seam. Every hook is optional and
// is called from the transport's goroutines, so it must be safe for
// concurrent use and must not wait for raft's main loop (raft may be
// waiting for the seam).
type Hooks struct {
	// OnClamp is told of each append whose commit index was clamped, with
	// the leader's commit index and the clamped one.
	OnClamp func(leaderCommit, clamped uint64)
	// Intercept sees every RPC on the consumer path after the clamp, in
	// arrival order. Returning true means it has answered the RPC itself
	// (rpc.Respond, after reading rpc.Reader to its end when there is one)
	// and raft never sees it.
	Intercept func(rpc raft.RPC) (handled bool)
	// FastPath reports whether a heartbeat may be handled on the
	// connection's goroutine. false sends it through the consumer (and
	// Intercept) instead. nil: every heartbeat takes the fast path.
	FastPath func(hb *raft.AppendEntriesRequest) bool
	// InRaft is called with true before an RPC is handed to raft's main
	// loop on the consumer path and with false once raft has answered it
	// (or the seam closes): whatever raft does to its log in between, it
	// does for that RPC (raft handles one RPC at a time). A heartbeat that
	// FastPath sends through the consumer is not counted: it carries no
	// entries, so raft writes nothing for it.
	InRaft func(begin bool)
	// Answered, when set, sees raft's answer to each RPC the consumer path
	// handed it (not the ones Intercept answered, nor heartbeats FastPath
	// sent through the consumer), after raft answered and before the
	// sender is told. It runs on the seam's goroutine: the next RPC waits.
	Answered func(rpc raft.RPC, resp raft.RPCResponse)
	// CommitBound, when set, bounds the commit index this member sends in
	// its own appends (outbound, on every path): a leader whose own log
	// is not yet durable up to raft's commit index must not tell followers
	// that entries are committed on the strength of its own copy.
	CommitBound func() uint64
}

// ClampCommit applies the seam's rule (Clamp) to one request: it lowers
// LeaderCommitIndex to PrevLogEntry + len(Entries) when it is higher, and
// reports whether it did. It is what Wrap does to every incoming append.
func ClampCommit(a *raft.AppendEntriesRequest) (leaderCommit uint64, clamped bool) {
	leaderCommit = a.LeaderCommitIndex
	commit, clamped := Clamp(a.PrevLogEntry, len(a.Entries), leaderCommit)
	if !clamped || bugs.On("clamp") {
		return leaderCommit, false
	}
	a.LeaderCommitIndex = commit
	return leaderCommit, true
}

type seam struct {
	inner raft.Transport
	hooks Hooks
	out   chan raft.RPC
	stop  chan struct{}
	once  sync.Once
}

type seamPreVote struct{ *seam }

var (
	_ raft.Transport   = (*seam)(nil)
	_ raft.WithClose   = (*seam)(nil)
	_ raft.WithPreVote = seamPreVote{}
)

func (s *seam) clamp(rpc raft.RPC) {
	a, ok := rpc.Command.(*raft.AppendEntriesRequest)
	if !ok {
		return
	}
	if lc, clamped := ClampCommit(a); clamped && s.hooks.OnClamp != nil {
		s.hooks.OnClamp(lc, a.LeaderCommitIndex)
	}
}

// forward hands the inner transport's RPCs to raft, clamped, until Close.
// It hands over one at a time and waits for raft's answer before the next,
// so the member's policy (Intercept) always decides on the state raft left
// after the previous RPC — a log that raft is still writing to would make
// "what would this append do to my log" a guess. raft's main loop handles
// RPCs one at a time anyway, so this costs no concurrency.
func (s *seam) forward() {
	in := s.inner.Consumer()
	for {
		select {
		case rpc := <-in:
			if !s.deliver(rpc, true) {
				return
			}
		case <-s.stop:
			return
		}
	}
}

// deliver hands one RPC to raft (or to the intercept), clamped, and with
// wait, returns once raft has answered it. false: the seam is closing.
func (s *seam) deliver(rpc raft.RPC, wait bool) bool {
	s.clamp(rpc)
	if s.hooks.Intercept != nil && s.hooks.Intercept(rpc) {
		return true
	}
	orig := rpc.RespChan
	var answer chan raft.RPCResponse
	if wait {
		answer = make(chan raft.RPCResponse, 1)
		rpc.RespChan = answer
		if s.hooks.InRaft != nil {
			s.hooks.InRaft(true)
			defer s.hooks.InRaft(false)
		}
	}
	select {
	case s.out <- rpc:
	case <-s.stop:
		orig <- raft.RPCResponse{Error: raft.ErrTransportShutdown}
		return false
	}
	if !wait {
		return true
	}
	select {
	case r := <-answer:
		if s.hooks.Answered != nil {
			s.hooks.Answered(rpc, r)
		}
		orig <- r // the transport's channel has room for its one answer
		return true
	case <-s.stop:
		return false
	}
}

// Consumer implements raft.Transport: the inner transport's RPCs, with
// every AppendEntries clamped.
func (s *seam) Consumer() <-chan raft.RPC { return s.out }

// SetHeartbeatHandler implements raft.Transport: the fast path is clamped
// too (a heartbeat carries no commit index today, but the rule must not
// depend on which path a request takes), and a heartbeat the FastPath hook
// refuses goes through the consumer instead.
func (s *seam) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		s.inner.SetHeartbeatHandler(nil)
		return
	}
	s.inner.SetHeartbeatHandler(func(rpc raft.RPC) {
		if hb, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && s.hooks.FastPath != nil && !s.hooks.FastPath(hb) {
			// raft's main loop handles it; the inner transport waits for
			// the answer on rpc.RespChan as for any RPC.
			s.deliver(rpc, false)
			return
		}
		s.clamp(rpc)
		cb(rpc)
	})
}

// Close implements raft.WithClose: it closes the inner transport (when it
// can be closed) and stops forwarding.
func (s *seam) Close() error {
	var err error
	if c, ok := s.inner.(raft.WithClose); ok {
		err = c.Close()
	}
	s.once.Do(func() { close(s.stop) })
	return err
}

// LocalAddr implements raft.Transport.
func (s *seam) LocalAddr() raft.ServerAddress { return s.inner.LocalAddr() }

// AppendEntriesPipeline implements raft.Transport: the pipeline's appends
// carry a commit index within CommitBound too.
func (s *seam) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := s.inner.AppendEntriesPipeline(id, target)
	if err != nil || s.hooks.CommitBound == nil {
		return p, err
	}
	return boundPipeline{p, s}, nil
}

// AppendEntries implements raft.Transport: within CommitBound.
func (s *seam) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	s.boundCommit(args)
	return s.inner.AppendEntries(id, target, args, resp)
}

// boundCommit lowers an outbound append's commit index to CommitBound.
func (s *seam) boundCommit(args *raft.AppendEntriesRequest) {
	if s.hooks.CommitBound != nil {
		args.LeaderCommitIndex = Bound(args.LeaderCommitIndex, s.hooks.CommitBound())
	}
}

// boundPipeline is an append pipeline whose appends carry a commit index
// within the seam's CommitBound.
type boundPipeline struct {
	raft.AppendPipeline
	s *seam
}

func (p boundPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.s.boundCommit(args)
	return p.AppendPipeline.AppendEntries(args, resp)
}

// RequestVote implements raft.Transport.
func (s *seam) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return s.inner.RequestVote(id, target, args, resp)
}

// InstallSnapshot implements raft.Transport.
func (s *seam) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return s.inner.InstallSnapshot(id, target, args, resp, data)
}

// EncodePeer implements raft.Transport.
func (s *seam) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return s.inner.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport.
func (s *seam) DecodePeer(b []byte) raft.ServerAddress { return s.inner.DecodePeer(b) }

// TimeoutNow implements raft.Transport.
func (s *seam) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return s.inner.TimeoutNow(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (s seamPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return s.inner.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}
