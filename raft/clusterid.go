package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// The cluster ID (Config.ClusterID) is checked on both sides of a join:
//
//   - The leader, before it adds a member (addLocal), asks the member's
//     status over the status RPC and refuses one whose cluster ID differs
//     (ErrClusterMismatch), or which does not answer (ErrMemberUnreachable):
//     nothing enters the configuration.
//   - A member that has no state yet (it waits to be added) does not take
//     its first append or snapshot before it asked the sender's status and
//     found the sender's cluster ID equal to its own: it refuses them until
//     then (the leader retries), and refuses every one from a leader of
//     another cluster, so it never stores an entry of a cluster it was not
//     started for (Status.ClusterRefused, one EventClusterMismatch and one
//     log line per sender and ID).
//
// A member whose Config.ClusterID is "" checks nothing on either side. A
// member with state (restarted, or bootstrapped) is past its join: its
// host checks its data dir's identity.

// joinCheckTimeout bounds a joining member's status call to the sender of
// its first append.
const joinCheckTimeout = 2 * time.Second

// joinGate is a joining member's state: whether its cluster ID was
// checked against a leader's, and what it refused.
type joinGate struct {
	checked atomic.Bool // the sender of an append had this member's cluster ID (or no check is due)
	mu      sync.Mutex  // one check at a time
	refused atomic.Pointer[ClusterMismatchError]
	told    map[string]bool // sender and cluster already logged and published
}

// checkAddCluster is the leader's check before adding member id at addr.
func (n *Node) checkAddCluster(ctx context.Context, id, addr string) error {
	if n.cfg.ClusterID == "" {
		return nil
	}
	for _, m := range n.Status().Members {
		if m.ID == id && m.Address == addr {
			return nil // a member already: its join was checked then
		}
	}
	ctx, cancel := context.WithTimeout(ctx, joinCheckTimeout)
	defer cancel()
	st, err := n.statusOfMember(ctx, id, addr)
	if err != nil {
		return fmt.Errorf("raft: add %s: %w at %s (start it first, waiting to be added): %v", id, ErrMemberUnreachable, addr, err)
	}
	if st.ClusterID != n.cfg.ClusterID {
		return &ClusterMismatchError{Member: id, Address: addr, Cluster: n.cfg.ClusterID, Other: st.ClusterID, Leader: true}
	}
	return nil
}

// statusOfMember asks member id at addr for its status; under TLS its
// certificate must name id.
func (n *Node) statusOfMember(ctx context.Context, id, addr string) (Status, error) {
	return n.StatusOf(transport.ExpectPeer(ctx, id), addr)
}

// joinChecked reports whether an append or snapshot from the sender of
// header may pass; if not, it has answered rpc (refused). It runs at the
// seam, on the transport's goroutines.
func (n *Node) joinChecked(rpc hraft.RPC, header hraft.RPCHeader) bool {
	if n.join.checked.Load() {
		return true
	}
	from, addr := string(header.ID), string(header.Addr)
	err := n.checkSender(from, addr)
	if err == nil {
		return true
	}
	metrics.IncrCounter([]string{"jobraft", "raft", "join_refused"}, 1)
	if req, ok := rpc.Command.(*hraft.InstallSnapshotRequest); ok {
		go func() { // drained off the seam's goroutine
			_ = drainInstall(rpc.Reader, req.Size)
			rpc.Respond(nil, errors.Join(ErrRefusedAtSeam, err))
		}()
		return false
	}
	rpc.Respond(nil, errors.Join(ErrRefusedAtSeam, err))
	return false
}

// checkSender asks the sender of a first append for its cluster ID: nil
// when it is this member's (the gate opens for good).
func (n *Node) checkSender(from, addr string) error {
	n.join.mu.Lock()
	defer n.join.mu.Unlock()
	if n.join.checked.Load() {
		return nil
	}
	if from == "" || addr == "" {
		return fmt.Errorf("raft: this member waits to be added to cluster %q: a request without sender ID and address is not taken", n.cfg.ClusterID)
	}
	ctx, cancel := context.WithTimeout(n.life, joinCheckTimeout)
	defer cancel()
	st, err := n.statusOfMember(ctx, from, addr)
	if err != nil {
		return fmt.Errorf("raft: this member waits to be added to cluster %q: the cluster ID of %s at %s could not be checked: %v", n.cfg.ClusterID, from, addr, err)
	}
	if st.ClusterID != n.cfg.ClusterID {
		e := &ClusterMismatchError{Member: n.cfg.ID, Address: addr, Cluster: n.cfg.ClusterID, Other: st.ClusterID, Sender: from}
		n.join.refused.Store(e)
		key := from + "\x00" + st.ClusterID
		if !n.join.told[key] {
			if n.join.told == nil {
				n.join.told = map[string]bool{}
			}
			n.join.told[key] = true
			n.cfg.Logger.Error("refusing to join: "+e.Error(), "from", from, "cluster_id", n.cfg.ClusterID, "their_cluster_id", st.ClusterID)
			n.events.publish(Event{Kind: EventClusterMismatch, Leader: from, Err: e})
		}
		return e
	}
	n.join.checked.Store(true)
	n.join.refused.Store(nil)
	n.cfg.Logger.Info("joining: the leader's cluster ID is this member's", "from", from, "cluster_id", n.cfg.ClusterID)
	return nil
}
