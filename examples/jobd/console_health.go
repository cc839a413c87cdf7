package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
)

// clusterHealth is the cluster as this member reaches it: every member's
// row (the status RPC, 2 s per member) and whether this member reaches a
// majority of the voters. Every console page shows the quorum banner from
// it; the cluster page shows the rows.
type clusterHealth struct {
	At        time.Time   `json:"at"`
	Self      string      `json:"self"`
	Role      string      `json:"role"`   // this member's raft role
	Leader    string      `json:"leader"` // as this member knows it ("": none)
	Voters    []string    `json:"voters"`
	Reachable []string    `json:"reachable"` // voters that answered, this member included
	Missing   []string    `json:"missing"`   // voters that did not
	Need      int         `json:"need"`      // a majority of Voters
	Quorum    bool        `json:"quorum"`    // len(Reachable) >= Need
	Members   []memberRow `json:"members"`
	self      client.Status
}

// Banner is the quorum banner's text ("" when there is nothing to say).
func (h *clusterHealth) Banner() string {
	switch {
	case h == nil:
		return ""
	case len(h.Voters) == 0:
		return "This member is in no configuration (not added yet, or removed)."
	case !h.Quorum:
		return fmt.Sprintf("Quorum lost: this member reaches %d of %d voters, a quorum needs %d (not answering: %s). "+
			"No job can be submitted, claimed or settled until a majority is back; what the pages show is this member's last applied state.",
			len(h.Reachable), len(h.Voters), h.Need, strings.Join(h.Missing, ", "))
	case h.Leader == "":
		return fmt.Sprintf("No leader known: %d of %d voters reachable (a quorum): an election is under way.", len(h.Reachable), len(h.Voters))
	}
	return ""
}

// healthTTL: how long a computed clusterHealth is reused (by every page
// and live stream of this jobd): one round of status RPCs per period.
const healthTTL = 2 * time.Second

// healthCache holds the last clusterHealth; one computation at a time.
type healthCache struct {
	run  sync.Mutex // held while computing
	mu   sync.Mutex
	last *clusterHealth
	// catchUpStart: the lag at which this console first saw each member
	// catching up (the progress bar's 0%); forgotten once it is not.
	catchUpStart map[string]uint64
}

// get returns a clusterHealth at most maxAge old, computing one if needed
// (that takes up to about 2 s when a member does not answer).
func (c *console) health(ctx context.Context, maxAge time.Duration) *clusterHealth {
	hc := &c.healthC
	hc.mu.Lock()
	if l := hc.last; l != nil && time.Since(l.At) < maxAge {
		hc.mu.Unlock()
		return l
	}
	hc.mu.Unlock()
	hc.run.Lock()
	defer hc.run.Unlock()
	hc.mu.Lock()
	if l := hc.last; l != nil && time.Since(l.At) < maxAge { // another caller just computed it
		hc.mu.Unlock()
		return l
	}
	hc.mu.Unlock()
	// Not the caller's context: the result is shared, and a page closed
	// while it was computed must not leave "down" rows for the next one
	// (each call is bounded by its own timeout).
	h := c.computeHealth(context.WithoutCancel(ctx))
	hc.mu.Lock()
	hc.last = h
	hc.mu.Unlock()
	return h
}

// cachedHealth returns the last clusterHealth if it is fresh, else nil
// (pages render without waiting; the live stream fills the banner in).
func (c *console) cachedHealth() *clusterHealth {
	c.healthC.mu.Lock()
	defer c.healthC.mu.Unlock()
	if l := c.healthC.last; l != nil && time.Since(l.At) < 2*healthTTL {
		return l
	}
	return nil
}

func (c *console) computeHealth(ctx context.Context) *clusterHealth {
	node := c.s.ctl.Node()
	self := selfStatus(ctx, node)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms := memberStatuses(ctx, node, self)
	var prog []raft.MemberProgress
	if self.Progress != nil {
		prog = self.Progress
	} else if self.LeaderAddress != "" {
		if lst, err := node.StatusOf(ctx, self.LeaderAddress); err == nil {
			prog = lst.Progress
		}
	}
	progress := map[string]*raft.MemberProgress{}
	for i := range prog {
		progress[prog[i].ID] = &prog[i]
	}
	h := &clusterHealth{At: time.Now(), Self: self.ID, Role: self.Role, Leader: self.LeaderID, self: self}
	var leaderLast uint64
	for _, m := range ms {
		if m.Status != nil && m.Status.Role == "Leader" {
			leaderLast = m.Status.LastIndex
		}
	}
	for _, m := range ms {
		if m.Voter {
			h.Voters = append(h.Voters, m.ID)
			if m.Status != nil {
				h.Reachable = append(h.Reachable, m.ID)
			} else {
				h.Missing = append(h.Missing, m.ID)
			}
		}
		h.Members = append(h.Members, c.rowOf(m, self.ID, leaderLast, progress[m.ID]))
	}
	h.Need = len(h.Voters)/2 + 1
	h.Quorum = len(h.Voters) > 0 && len(h.Reachable) >= h.Need
	return h
}

// rowOf is one member's row; the progress bar's start is kept across
// calls (healthCache.catchUpStart).
func (c *console) rowOf(m client.Member, self string, leaderLast uint64, p *raft.MemberProgress) memberRow {
	row := memberRow{ID: m.ID, Address: m.Address, Voter: m.Voter, Self: m.ID == self, Up: m.Status != nil, Error: m.Error, Progress: -1}
	st := m.Status
	if st != nil {
		row.Role, row.Term, row.Commit, row.Applied, row.Last, row.Ready = st.Role, st.Term, st.CommitIndex, st.AppliedIndex, st.LastIndex, st.Ready
		row.Leader = st.Role == "Leader"
		if leaderLast > 0 {
			row.LagKnown = true
			if leaderLast > st.LastIndex {
				row.Lag = leaderLast - st.LastIndex
			}
		}
	}
	row.CatchUp = catchUpOf(row, st, p)
	c.healthC.mu.Lock()
	defer c.healthC.mu.Unlock()
	if c.healthC.catchUpStart == nil {
		c.healthC.catchUpStart = map[string]uint64{}
	}
	switch {
	case !row.Up || p == nil || p.State != raft.StateCatchingUp:
		delete(c.healthC.catchUpStart, m.ID)
	case p.Installing && p.SnapshotSize > 0:
		row.Progress = float64(p.SnapshotSize-min(p.SnapshotBytesRemaining, p.SnapshotSize)) / float64(p.SnapshotSize)
		row.ETA = etaText(p.ETA)
	default:
		start, ok := c.healthC.catchUpStart[m.ID]
		if !ok || p.Lag > start {
			start = p.Lag
			c.healthC.catchUpStart[m.ID] = start
		}
		if start > 0 {
			row.Progress = float64(start-p.Lag) / float64(start)
		}
		row.ETA = etaText(p.ETA)
	}
	return row
}

// etaText renders a catch-up ETA (negative: unknown; zero: nothing remains).
func etaText(d time.Duration) string {
	switch {
	case d < 0:
		return "unknown"
	case d == 0:
		return "now"
	}
	return "about " + d.Round(100*time.Millisecond).String()
}
