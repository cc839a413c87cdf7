package raft

import (
	hraft "github.com/hashicorp/raft"
)

// observe turns hashicorp/raft observations into events, and makes a new
// leader commit a barrier of its term so reads can be served.
func (n *Node) observe() {
	ch := make(chan hraft.Observation, 64)
	obs := hraft.NewObserver(ch, false, func(o *hraft.Observation) bool {
		switch o.Data.(type) {
		case hraft.LeaderObservation, hraft.RaftState, hraft.PeerObservation:
			return true
		}
		return false
	})
	n.r.RegisterObserver(obs)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.r.DeregisterObserver(obs)
		for {
			select {
			case <-n.closed:
				return
			case o := <-ch:
				n.observed(o)
			}
		}
	}()
}

func (n *Node) observed(o hraft.Observation) {
	switch d := o.Data.(type) {
	case hraft.LeaderObservation:
		n.leaders.observe(string(d.LeaderID))
		n.events.publish(Event{Kind: EventLeaderChange, Leader: string(d.LeaderID), Term: n.r.CurrentTerm()})
		if d.LeaderID != "" && string(d.LeaderID) != n.cfg.ID {
			// One line per state change (hashicorp/raft's own are quiet
			// below Warn: quietlog.go); the leader's is "leading".
			n.cfg.Logger.Info("following leader", "leader", string(d.LeaderID), "term", n.r.CurrentTerm())
		}
	case hraft.RaftState:
		n.events.publish(Event{Kind: EventRoleChange, Role: d.String(), Term: n.r.CurrentTerm()})
		switch d {
		case hraft.Leader:
			n.cfg.Logger.Info("leading", "term", n.r.CurrentTerm())
		case hraft.Candidate:
			n.cfg.Logger.Debug("campaigning", "term", n.r.CurrentTerm())
		}
		if d == hraft.Leader {
			term := n.r.CurrentTerm()
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				// The term's first barrier (read.go), shared with the reads
				// that arrive before it commits. Never a bare Error():
				// hashicorp/raft does not answer a future still queued when
				// it shuts down, and Close waits for this goroutine.
				_ = n.awaitReady(n.closedCtx(), term)
			}()
		}
	case hraft.PeerObservation:
		m := Member{ID: string(d.Peer.ID), Address: string(d.Peer.Address), Voter: d.Peer.Suffrage == hraft.Voter}
		if d.Removed {
			n.events.publish(Event{Kind: EventMemberRemoved, Member: m})
		} else {
			n.events.publish(Event{Kind: EventMemberAdded, Member: m})
		}
	}
}
