package raft

import (
	"context"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// An operation waits at most Config.LeaderWait to reach a leader; then it
// fails with a *NoLeaderError that says what is missing. What it says of
// the voters is found out then, not guessed: each voter of the latest
// configuration is asked for its status (probeTimeout), and the answer is
// shared for reachTTL by the operations that give up together (a burst of
// requests without a quorum costs one round of status calls, not one per
// request).

const (
	probeTimeout = time.Second
	reachTTL     = time.Second
)

// reachCache is the last reachability round.
type reachCache struct {
	mu        sync.Mutex
	at        time.Time
	voters    []string
	reachable []string
}

// noLeader is the error of an operation that began waiting for a leader
// at start and reached none; last is its last attempt's error.
func (n *Node) noLeader(start time.Time, last error) *NoLeaderError {
	_, leader := n.r.LeaderWithID()
	voters, reachable := n.reachability()
	return &NoLeaderError{Waited: time.Since(start), Self: n.cfg.ID, Leader: string(leader),
		Voters: voters, Reachable: reachable, Last: last}
}

// reachability returns the voters of the latest configuration and those
// that answered a status request just now (this member, if a voter,
// always).
func (n *Node) reachability() (voters, reachable []string) {
	n.reach.mu.Lock()
	defer n.reach.mu.Unlock()
	if !n.reach.at.IsZero() && time.Since(n.reach.at) < reachTTL {
		return n.reach.voters, n.reach.reachable
	}
	var others []hraft.Server
	if f := n.r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage != hraft.Voter {
				continue
			}
			voters = append(voters, string(s.ID))
			if string(s.ID) != n.cfg.ID {
				others = append(others, s)
			}
		}
	}
	ctx, cancel := context.WithTimeout(n.life, probeTimeout)
	defer cancel()
	answered := make(chan string, len(others))
	for _, s := range others {
		go func() {
			_, err := n.caller.Call(transport.ExpectPeer(ctx, string(s.ID)), string(s.Address), methodStatus, nil)
			if err != nil {
				answered <- ""
				return
			}
			answered <- string(s.ID)
		}()
	}
	ok := map[string]bool{n.cfg.ID: true}
	for range others {
		ok[<-answered] = true
	}
	for _, v := range voters { // in configuration order
		if ok[v] {
			reachable = append(reachable, v)
		}
	}
	n.reach.at, n.reach.voters, n.reach.reachable = time.Now(), voters, reachable
	return voters, reachable
}
