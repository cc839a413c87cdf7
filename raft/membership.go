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

// AddMember adds a member: first as a non-voter, then, once it has caught
// up with the leader's commit index as it stood when it was added, as a
// voter (the simple rule; the catch-up policy refines it). It may be called
// on any member; it runs on the leader. The new member must be running
// (started without Bootstrap) at addr.
func (n *Node) AddMember(ctx context.Context, id, addr string) error {
	req, _ := json.Marshal(Member{ID: id, Address: addr, Voter: true})
	return n.onLeader(ctx, methodAdd, req, func(ctx context.Context) error { return n.addLocal(ctx, id, addr) })
}

// RemoveMember removes a member (the leader included: it steps down once
// the change commits). It may be called on any member.
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

// onLeader runs local on the leader, or forwards req to it.
func (n *Node) onLeader(ctx context.Context, method string, req []byte, local func(context.Context) error) error {
	for {
		addr, id := n.r.LeaderWithID()
		var err error
		switch {
		case id == "":
			err = ErrNoLeader
		case string(id) == n.cfg.ID:
			return local(ctx)
		default:
			_, err = n.caller.Call(transport.ExpectPeer(ctx, string(id)), string(addr), method, req)
			var re *transport.RemoteError
			if err == nil || (errors.As(err, &re) && re.Code != codeNotLeader) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: %s: %w (last error: %v)", method, ctx.Err(), err)
		case <-n.closed:
			return ErrClosed
		case <-time.After(n.cfg.HeartbeatTimeout / 10):
		}
	}
}

func (n *Node) addLocal(ctx context.Context, id, addr string) error {
	if err := waitFuture(ctx, n.r.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.cfg.ApplyTimeout)); err != nil {
		return fmt.Errorf("raft: add %s as non-voter: %w", id, err)
	}
	target := n.r.CommitIndex()
	for {
		st, err := n.StatusOf(ctx, addr)
		if err == nil && st.LastIndex >= target && st.AppliedIndex+uint64(n.cfg.MaxAppendEntries) >= target {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: %s did not catch up to %d: %w", id, target, ctx.Err())
		case <-time.After(n.cfg.HeartbeatTimeout / 10):
		}
	}
	if err := waitFuture(ctx, n.r.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.cfg.ApplyTimeout)); err != nil {
		return fmt.Errorf("raft: promote %s: %w", id, err)
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
	return nil, n.addLocal(ctx, m.ID, m.Address)
}

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
