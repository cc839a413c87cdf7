package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// Wait polls every member's status API until ok accepts the set
// (default: every member ready and agreeing on a leader) or the deadline.
func (c *Cluster) Wait(ctx context.Context, d time.Duration, ok func([]client.Status) bool) ([]client.Status, error) {
	if ok == nil {
		ok = AgreeOnLeader
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last []client.Status
	var lastErr error
	for {
		sts := make([]client.Status, len(c.Members))
		lastErr = nil
		for i, m := range c.Members {
			st, err := m.Status(ctx)
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", m.ID, err)
				break
			}
			sts[i] = st
		}
		if lastErr == nil {
			last = sts
			if ok(sts) {
				return sts, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w (last status %s, last error %v)", ctx.Err(), Describe(last), lastErr)
		case <-tick.C:
		}
	}
}

// AgreeOnLeader: every member is ready and names the same leader, which
// says it leads.
func AgreeOnLeader(sts []client.Status) bool {
	leaders := 0
	for _, s := range sts {
		if !s.Ready || s.LeaderID != sts[0].LeaderID {
			return false
		}
		if s.Role == "Leader" {
			leaders++
		}
	}
	return leaders == 1
}

// SameState: every member is ready (applied everything it knows
// committed), at the same commit and last index, with the same state digest
// at the same applied index.
func SameState(sts []client.Status) bool {
	if !AgreeOnLeader(sts) {
		return false
	}
	for _, s := range sts {
		if s.CommitIndex != sts[0].CommitIndex || s.LastIndex != sts[0].LastIndex ||
			s.DigestIndex != sts[0].DigestIndex || s.Digest != sts[0].Digest {
			return false
		}
	}
	return true
}

// Describe is a one-line summary of statuses, for errors.
func Describe(sts []client.Status) string {
	var b strings.Builder
	for _, s := range sts {
		fmt.Fprintf(&b, "[%s %s term %d leader %q commit %d applied %d] ", s.ID, s.Role, s.Term, s.LeaderID, s.CommitIndex, s.AppliedIndex)
	}
	return b.String()
}

// NewLeader waits (30 s at most) until every member but member i (the
// leader of term, killed, cut off or frozen) names the same other leader
// in a later term, through their status API.
func (c *Cluster) NewLeader(ctx context.Context, i int, term uint64) (string, uint64, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	old := c.Members[i].ID
	for {
		var sts []client.Status
		for j, m := range c.Members {
			if j == i {
				continue
			}
			if st, err := m.Status(deadline); err == nil {
				sts = append(sts, st)
			}
		}
		if len(sts) == len(c.Members)-1 && sts[0].LeaderID != "" && sts[0].LeaderID != old {
			agree := true
			for _, s := range sts {
				agree = agree && s.LeaderID == sts[0].LeaderID && s.Term > term
			}
			if agree {
				return sts[0].LeaderID, sts[0].Term, nil
			}
		}
		select {
		case <-deadline.Done():
			return "", 0, fmt.Errorf("no new leader within 30s after %s (term %d)", old, term)
		case <-tick.C:
		}
	}
}

// Leader asks the running members who leads, and checks that member
// says so itself.
func (c *Cluster) Leader(ctx context.Context) (string, uint64, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for i, m := range c.Members {
			if !c.Running(i) {
				continue
			}
			st, err := m.Status(ctx)
			if err != nil || st.LeaderID == "" {
				continue
			}
			j := c.Index(st.LeaderID)
			if j < 0 {
				continue
			}
			if ls, err := c.Members[j].Status(ctx); err == nil && ls.Role == "Leader" {
				return ls.ID, ls.Term, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", 0, errors.New("no leader found through the status API")
		case <-tick.C:
		}
	}
}
