package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
)

// Membership over the API: list the members with their catch-up state,
// add one (it joins as a non-voter and the leader's catch-up policy
// promotes it), remove one. The new member's first start is
//
//	jobd -id n4 -data data/n4 -raft-addr ... -join -cluster-id <cluster_id of GET /v1/cluster/members> [TLS flags]
//
// -join makes it wait to be added instead of bootstrapping a cluster of
// its own; then POST /v1/cluster/members {"id": "n4", "address": "<its raft address>"} on any member.

// memberAdds are the adds started through this member's API: each runs
// raft.Node.AddMember in the background (it follows leader changes) until
// the member is promoted, the policy gives up, or it is removed.
type memberAdds struct {
	mu   sync.Mutex
	adds map[string]*memberAdd
}

type memberAdd struct {
	addr    string
	started time.Time
	done    chan struct{}
	err     error
	cancel  context.CancelFunc
}

func (a *memberAdds) get(id string) *memberAdd {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.adds[id]
}

// start runs add for id unless one for the same address is running.
func (a *memberAdds) start(id, addr string, add func(context.Context) error) *memberAdd {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.adds == nil {
		a.adds = map[string]*memberAdd{}
	}
	if cur := a.adds[id]; cur != nil && cur.addr == addr && !cur.finished() {
		return cur
	} else if cur != nil {
		cur.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &memberAdd{addr: addr, started: time.Now(), done: make(chan struct{}), cancel: cancel}
	a.adds[id] = m
	go func() {
		defer cancel()
		m.err = add(ctx)
		close(m.done)
	}()
	return m
}

// stop cancels id's add, if any.
func (a *memberAdds) stop(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m := a.adds[id]; m != nil {
		m.cancel()
		delete(a.adds, id)
	}
}

func (m *memberAdd) finished() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// wire is the add on the wire.
func (m *memberAdd) wire() *client.MemberAdd {
	out := &client.MemberAdd{State: "pending", Started: m.started}
	if m.finished() {
		out.State = "promoted"
		if m.err != nil {
			out.State, out.Error = "failed", m.err.Error()
		}
	}
	return out
}

// checkMemberID: 1 to 64 bytes of the job ID alphabet (A-Z a-z 0-9 . _ : -).
func checkMemberID(id string) error {
	if id == "" || len(id) > 64 || id == "." || id == ".." {
		return bad("member ID %q: 1 to 64 characters, not . or ..", id)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return bad("member ID %q: byte %d (%q) is outside A-Z a-z 0-9 . _ : -", id, i, id[i])
		}
	}
	return nil
}

// leaderProgress returns the leader's catch-up lines (this member's when it
// leads, else asked of the leader over the status RPC) and the leader's ID.
func leaderProgress(ctx context.Context, node *raft.Node) ([]raft.MemberProgress, raft.Status) {
	st := node.Status()
	if st.Progress != nil || st.LeaderAddress == "" {
		return st.Progress, st
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lst, err := node.StatusOf(ctx, st.LeaderAddress)
	if err != nil {
		return nil, st
	}
	return lst.Progress, st
}

// GET /v1/cluster/members: the cluster ID, the leader, and each member in
// this member's configuration with its suffrage and, from the leader's
// catch-up monitor, role, state (leader, caught_up, catching_up, stalled,
// diverged), reason, lag, stream rates and an estimate of completion.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request) error {
	prog, st := leaderProgress(r.Context(), s.ctl.Node())
	byID := map[string]raft.MemberProgress{}
	for _, p := range prog {
		byID[p.ID] = p
	}
	out := []client.MemberInfo{}
	for _, m := range st.Members {
		var p *raft.MemberProgress
		if mp, ok := byID[m.ID]; ok {
			p = &mp
		}
		var add *client.MemberAdd
		if a := s.adds.get(m.ID); a != nil {
			add = a.wire()
		}
		out = append(out, memberInfoOf(m, p, add))
	}
	writeJSON(w, http.StatusOK, client.Membership{ClusterID: s.clusterID, Leader: st.LeaderID, Members: out})
	return nil
}

// addTimeout bounds how long POST /v1/cluster/members waits for the
// member to enter the configuration as a non-voter.
const addTimeout = 10 * time.Second

// POST /v1/cluster/members {"id", "address"}: adds a member. It joins as a
// non-voter and is promoted by the leader's catch-up policy; the reply
// (202) comes once it is in the configuration, and GET /v1/cluster/members
// shows its progress. A voter already at that address: 200. The ID at
// another address: 409 (remove it first).
func (s *server) addMember(w http.ResponseWriter, r *http.Request) error {
	var in client.MemberRequest
	if err := decode(r, &in, false); err != nil {
		return err
	}
	voter, err := checkAdd(s.ctl.Node(), in.ID, in.Address)
	if err != nil {
		return err
	}
	if voter {
		writeJSON(w, http.StatusOK, client.MemberAdded{Address: in.Address, ID: in.ID, Suffrage: suffrage(true)})
		return nil
	}
	m, err := s.startAdd(r.Context(), in.ID, in.Address)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, client.MemberAdded{Address: in.Address, ID: in.ID, Suffrage: suffrage(m.Voter),
		Message: "joins as a non-voter, promoted by the leader's catch-up policy: GET /v1/cluster/members shows its progress"})
	return nil
}

// startAdd starts adding member id at addr in the background (the API and
// the console) and waits, at most addTimeout, until it is in the
// configuration, or the add failed: the leader refused it (another
// cluster's ID, not answering) or no leader took it.
func (s *server) startAdd(ctx context.Context, id, addr string) (raft.Member, error) {
	node := s.ctl.Node()
	a := s.adds.start(id, addr, func(ctx context.Context) error { return node.AddMember(ctx, id, addr) })
	deadline := time.NewTimer(addTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, m := range node.Status().Members {
			if m.ID == id {
				return m, nil
			}
		}
		select {
		case <-a.done:
			if a.err != nil {
				return raft.Member{}, memberError(a.err)
			}
		case <-deadline.C:
			return raft.Member{}, &clientError{code: http.StatusServiceUnavailable, kind: "not_added",
				reason: fmt.Sprintf("member %q not in the configuration after %s (no leader?); the add continues in the background", id, addTimeout)}
		case <-ctx.Done():
			return raft.Member{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// DELETE /v1/cluster/members/{id}: removes a member (the leader included:
// it steps down once the change commits). 404 when the configuration does
// not name it.
func (s *server) removeMember(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkMemberID(id); err != nil {
		return err
	}
	node := s.ctl.Node()
	found := false
	for _, m := range node.Status().Members {
		found = found || m.ID == id
	}
	if !found {
		return &clientError{code: http.StatusNotFound, kind: "not_found", reason: fmt.Sprintf("no member %q in the configuration", id)}
	}
	s.adds.stop(id)
	ctx, cancel := context.WithTimeout(r.Context(), addTimeout)
	defer cancel()
	if err := node.RemoveMember(ctx, id); err != nil {
		return memberError(err)
	}
	writeJSON(w, http.StatusOK, client.MemberRemoved{Removed: id})
	return nil
}

// checkAdd checks a request to add member id at raft address addr (the API
// and the console): a valid ID and host:port, neither taken by another
// member. voter: id is already a voter at addr (nothing to do).
func checkAdd(node *raft.Node, id, addr string) (voter bool, err error) {
	if err := checkMemberID(id); err != nil {
		return false, err
	}
	host, port, err := net.SplitHostPort(addr)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return false, bad("address %q: host:port required", addr)
	}
	for _, m := range node.Status().Members {
		switch {
		case m.ID == id && m.Address != addr:
			return false, &clientError{code: http.StatusConflict, kind: "member_exists",
				reason: fmt.Sprintf("member %q is at %s: remove it first (DELETE /v1/cluster/members/%s)", m.ID, m.Address, m.ID)}
		case m.ID != id && m.Address == addr:
			return false, &clientError{code: http.StatusConflict, kind: "address_taken", reason: fmt.Sprintf("member %q is at %s", m.ID, m.Address)}
		case m.ID == id && m.Voter:
			return true, nil
		}
	}
	return false, nil
}

// memberError maps a membership change's error.
func memberError(err error) error {
	switch {
	case errors.Is(err, raft.ErrStalled):
		return &clientError{code: http.StatusConflict, kind: "stalled", reason: err.Error()}
	case errors.Is(err, raft.ErrMemberDiverged):
		return &clientError{code: http.StatusConflict, kind: "diverged", reason: err.Error()}
	case errors.Is(err, raft.ErrClusterMismatch):
		// Both IDs in the reason; nothing changed.
		return &clientError{code: http.StatusConflict, kind: "cluster_mismatch", reason: err.Error()}
	case errors.Is(err, raft.ErrMemberUnreachable):
		return &clientError{code: http.StatusServiceUnavailable, kind: "member_unreachable", reason: err.Error()}
	case errors.Is(err, raft.ErrNoLeader), errors.Is(err, raft.ErrNotLeader):
		return &clientError{code: http.StatusServiceUnavailable, kind: "no_leader", reason: err.Error() + " (retry)"}
	}
	return err
}
