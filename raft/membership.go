package raft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// AddMember adds a member: first as a non-voter, then as a voter once the
// leader's catch-up policy promotes it (package catchup: a catch-up round
// completed within one election timeout). It may be called on any member;
// it runs on the leader, and is asked again of the next leader when the
// leadership moves. It returns nil once the member is a voter (at once for
// a voter), an error wrapping ErrStalled or ErrMemberDiverged when the
// policy gave up (the member stays a non-voter, named in the leader's
// Status.Progress, until it is removed or added again), or when ctx ends,
// or no leader was reached within Config.LeaderWait (ErrNoLeader). The new
// member must be running (started without Bootstrap) at addr. With a
// Config.ClusterID the leader asks it first: another cluster's member is
// refused (ErrClusterMismatch), one that does not answer too
// (ErrMemberUnreachable); nothing changes then.
func (n *Node) AddMember(ctx context.Context, id, addr string) error {
	req, _ := json.Marshal(Member{ID: id, Address: addr, Voter: true})
	return n.onLeader(ctx, methodAdd, req, func(ctx context.Context) error { return n.addLocal(ctx, id, addr) })
}

// RemoveMember removes a member (the leader included: it steps down once
// the change commits). It may be called on any member; it waits at most
// Config.LeaderWait for a leader (ErrNoLeader).
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	req, _ := json.Marshal(Member{ID: id})
	return n.onLeader(ctx, methodRemove, req, func(ctx context.Context) error {
		return waitFuture(ctx, n.r.RemoveServer(hraft.ServerID(id), 0, n.cfg.ApplyTimeout))
	})
}

// TransferLeadership asks the leader (this member) to hand leadership to
// the member id, or to the most up-to-date follower when id is "".
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if n.r.State() != hraft.Leader {
		return ErrNotLeader
	}
	if id == "" {
		return waitFuture(ctx, n.r.LeadershipTransfer())
	}
	for _, m := range n.Status().Members {
		if m.ID == id {
			if !m.Voter {
				// Only a voter can lead; raft would send the non-voter a
				// TimeoutNow and start a futile election (docs/upstream.md U5).
				return fmt.Errorf("%w: %q is a non-voter", ErrNotVoter, id)
			}
			return waitFuture(ctx, n.r.LeadershipTransferToServer(hraft.ServerID(id), hraft.ServerAddress(m.Address)))
		}
	}
	return fmt.Errorf("raft: no member %q", id)
}

// onLeader runs local on the leader, or forwards req to it. It waits at
// most LeaderWait for a leader (*NoLeaderError).
func (n *Node) onLeader(ctx context.Context, method string, req []byte, local func(context.Context) error) error {
	start := time.Now()
	for {
		addr, id := n.r.LeaderWithID()
		var err error
		switch {
		case id == "":
			err = ErrNoLeader
		case string(id) == n.cfg.ID:
			if err = local(ctx); !isNotLeader(err) {
				return err
			}
			// It ran here (an add may run long) until this member stopped
			// leading: the wait for the next leader starts now.
			start = time.Now()
		default:
			_, err = n.caller.Call(transport.ExpectPeer(ctx, string(id)), string(addr), method, req)
			var re *transport.RemoteError
			if err == nil || (errors.As(err, &re) && re.Code != codeNotLeader && re.Code != codeLeadershipLost) {
				return fromLeader(err)
			}
			if re != nil && re.Code == codeLeadershipLost {
				// It ran on the leader (an add may run long) until that
				// member stopped leading: as for the local case, the wait
				// for the next leader starts now.
				start = time.Now()
			}
		}
		left := n.cfg.LeaderWait - time.Since(start)
		if left <= 0 {
			return fmt.Errorf("raft: %s: %w", method, n.noLeader(start, err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: %s: %w (last error: %v)", method, ctx.Err(), err)
		case <-n.closed:
			return ErrClosed
		case <-time.After(min(n.cfg.HeartbeatTimeout/10, left)):
		}
	}
}

// addLocal adds the member as a non-voter and leaves its promotion to the
// catch-up monitor (catchup.go): it returns nil once the member is a voter,
// ErrStalled or ErrMemberDiverged when the policy gave up, ErrNotLeader
// when this member stopped leading first (the caller asks the next leader).
func (n *Node) addLocal(ctx context.Context, id, addr string) error {
	if err := n.checkAddCluster(ctx, id, addr); err != nil {
		return err
	}
	if err := waitFuture(ctx, n.r.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.cfg.ApplyTimeout)); err != nil {
		if n.r.State() != hraft.Leader || errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipLost) ||
			errors.Is(err, hraft.ErrLeadershipTransferInProgress) {
			return fmt.Errorf("raft: add %s as non-voter: %w: %w", id, ErrNotLeader, err)
		}
		return fmt.Errorf("raft: add %s as non-voter: %w", id, err)
	}
	for _, m := range n.Status().Members {
		if m.ID == id && m.Voter {
			return nil // already a voter (AddNonvoter keeps a voter's suffrage)
		}
	}
	ch, err := n.mon.candidate(id)
	if err != nil {
		return fmt.Errorf("raft: add %s: %w", id, err)
	}
	if err := n.waitPromotion(ctx, id, ch); err != nil {
		return fmt.Errorf("raft: add %s: %w", id, err)
	}
	return nil
}

func (n *Node) handleAdd(ctx context.Context, req []byte) ([]byte, error) {
	var m Member
	if err := json.Unmarshal(req, &m); err != nil || m.ID == "" || m.Address == "" {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "member id and address required"}
	}
	if n.r.State() != hraft.Leader {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: "not the leader"}
	}
	err := n.addLocal(ctx, m.ID, m.Address)
	switch {
	case isNotLeader(err):
		return nil, &transport.RemoteError{Code: codeLeadershipLost, Message: err.Error()}
	case errors.Is(err, ErrStalled):
		return nil, &transport.RemoteError{Code: codeStalled, Message: err.Error()}
	case errors.Is(err, ErrMemberDiverged):
		return nil, &transport.RemoteError{Code: codeMemberDiverged, Message: err.Error()}
	case errors.Is(err, ErrClusterMismatch):
		return nil, &transport.RemoteError{Code: codeClusterMismatch, Message: err.Error()}
	case errors.Is(err, ErrMemberUnreachable):
		return nil, &transport.RemoteError{Code: codeMemberUnreachable, Message: err.Error()}
	}
	return nil, err
}

// Remote error codes of a forwarded AddMember: the policy's verdicts, and
// codeLeadershipLost: the add ran on the leader until it stopped leading.
const (
	codeLeadershipLost    = "jr.leadership_lost"
	codeStalled           = "jr.stalled"
	codeMemberDiverged    = "jr.member_diverged"
	codeClusterMismatch   = "jr.cluster_mismatch"
	codeMemberUnreachable = "jr.member_unreachable"
)

// fromLeader turns a forwarded call's remote error back into what the
// leader returned: its text, and the sentinel its code names, so
// errors.Is(err, ErrStalled) holds on any member AddMember was asked of.
func fromLeader(err error) error {
	var re *transport.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case codeStalled:
		return &leaderError{sentinel: ErrStalled, remote: err}
	case codeMemberDiverged:
		return &leaderError{sentinel: ErrMemberDiverged, remote: err}
	case codeClusterMismatch:
		return &leaderError{sentinel: ErrClusterMismatch, remote: err}
	case codeMemberUnreachable:
		return &leaderError{sentinel: ErrMemberUnreachable, remote: err}
	}
	return err
}

// leaderError is an error the leader returned to a forwarded call: its
// text is the leader's, and it matches the sentinel the leader's error
// wrapped as well as the remote error.
type leaderError struct{ sentinel, remote error }

func (e *leaderError) Error() string   { return e.remote.Error() }
func (e *leaderError) Unwrap() []error { return []error{e.sentinel, e.remote} }

func (n *Node) handleRemove(ctx context.Context, req []byte) ([]byte, error) {
	var m Member
	if err := json.Unmarshal(req, &m); err != nil || m.ID == "" {
		return nil, &transport.RemoteError{Code: "jr.bad_request", Message: "member id required"}
	}
	if n.r.State() != hraft.Leader {
		return nil, &transport.RemoteError{Code: codeNotLeader, Message: "not the leader"}
	}
	return nil, waitFuture(ctx, n.r.RemoveServer(hraft.ServerID(m.ID), 0, n.cfg.ApplyTimeout))
}
