package raft

import (
	"context"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// A removed member is told nothing: the leader stops replicating to it
// once the configuration without it is appended, so it may hold that
// configuration or not, committed or not. It runs on knowing no leader
// (raft logs "not part of stable configuration" and starts no election).
// The node finds out itself, every removalCheck:
//
//   - its own latest configuration, committed, does not name it; or
//   - it knows no leader, and the leader its peers follow (one that
//     answers the status RPC as Leader) has a configuration without it, at
//     two checks in a row (an uncommitted change lasts milliseconds).
//
// A member whose configuration is empty (never added yet) is not removed.
// Then Status.Removed says how it learnt it, EventRemoved is published and
// one line logged; the host should stop it (jobd exits).

// removalCheck is how often a member checks whether it was removed.
const removalCheck = time.Second

// Removal says how a member learnt it was removed from the cluster.
type Removal struct {
	// Leader is the leader whose configuration does not name this member
	// ("" when its own committed configuration says so).
	Leader string `json:"leader,omitempty"`
	// Index is the index of the configuration that removed it, when it
	// holds it (0 otherwise).
	Index uint64 `json:"index,omitempty"`
	// At is when this member learnt it.
	At time.Time `json:"at"`
}

// removalState is the node's watch for its own removal.
type removalState struct {
	seen    atomic.Pointer[Removal]
	strikes int // consecutive checks with the leader's word only
}

// watchRemoval runs the checks until Close.
func (n *Node) watchRemoval() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(removalCheck)
		defer tick.Stop()
		for {
			select {
			case <-n.closed:
				return
			case <-tick.C:
				n.checkRemoved()
			}
		}
	}()
}

// checkRemoved runs one check.
func (n *Node) checkRemoved() {
	if n.removal.seen.Load() != nil {
		return // stays set until the member stops
	}
	f := n.r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	conf, index := f.Configuration(), f.Index()
	if len(conf.Servers) == 0 {
		return // never added: a member waiting to join
	}
	named := false
	for _, s := range conf.Servers {
		named = named || string(s.ID) == n.cfg.ID
	}
	if !named && index > 0 && index <= n.r.CommitIndex() {
		n.removed(Removal{Index: index, At: time.Now()})
		return
	}
	if _, leader := n.r.LeaderWithID(); leader != "" {
		n.removal.strikes = 0 // a leader replicates to this member
		return
	}
	if by := n.leaderWithout(conf.Servers); by != "" {
		if n.removal.strikes++; n.removal.strikes >= 2 {
			n.removed(Removal{Leader: by, At: time.Now()})
		}
		return
	}
	n.removal.strikes = 0
}

// leaderWithout asks the members of servers for their status and returns
// the ID of one that answers as the leader with a configuration that does
// not name this member ("" if none).
func (n *Node) leaderWithout(servers []hraft.Server) string {
	ctx, cancel := context.WithTimeout(n.life, probeTimeout)
	defer cancel()
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		st, err := n.StatusOf(transport.ExpectPeer(ctx, string(s.ID)), string(s.Address))
		if err != nil || st.Role != hraft.Leader.String() || st.Term < n.r.CurrentTerm() {
			continue
		}
		for _, m := range st.Members {
			if m.ID == n.cfg.ID {
				return ""
			}
		}
		return st.ID
	}
	return ""
}

// removed records the removal once: status, event, one log line.
func (n *Node) removed(r Removal) {
	if !n.removal.seen.CompareAndSwap(nil, &r) {
		return
	}
	how := "its own committed configuration no longer names it"
	if r.Leader != "" {
		how = "the configuration of leader " + clipID(r.Leader) + " no longer names it"
	}
	n.cfg.Logger.Error("this member was removed from the cluster ("+how+"): it takes no further part; stop it",
		"leader", r.Leader, "index", r.Index)
	n.events.publish(Event{Kind: EventRemoved, Leader: r.Leader, Index: r.Index, Member: Member{ID: n.cfg.ID, Address: n.mux.Addr()}})
}
