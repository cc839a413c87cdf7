package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// memberRow is one member on the cluster page (and in the live stream).
type memberRow struct {
	ID       string  `json:"id"`
	Address  string  `json:"address"`
	Voter    bool    `json:"voter"`
	Up       bool    `json:"up"`
	Self     bool    `json:"self"`
	Leader   bool    `json:"leader"`
	Role     string  `json:"role"`
	Term     uint64  `json:"term"`
	Commit   uint64  `json:"commit"`
	Applied  uint64  `json:"applied"`
	Last     uint64  `json:"last"`
	Lag      uint64  `json:"lag"` // entries behind the leader's last index (when the leader answered)
	LagKnown bool    `json:"lag_known"`
	Ready    bool    `json:"ready"`
	CatchUp  string  `json:"catch_up"`
	Progress float64 `json:"progress"` // catch-up progress in [0, 1]; -1: none to show
	ETA      string  `json:"eta"`      // the leader's estimate, while catching up
	Error    string  `json:"error"`
}

// catchUpOf describes a member's catch-up: the leader's catch-up policy
// (raft.MemberProgress: stalled or diverged with its reason, a snapshot or
// log being streamed with rate and ETA) where the leader reported one, else
// what the member's own raft status says (up, diverged, entries behind the
// leader, applied behind commit). A member that does not answer is down,
// and one that knows no leader cannot be judged caught up.
func catchUpOf(m memberRow, st *client.Status, p *raft.MemberProgress) string {
	switch {
	case !m.Up || st == nil:
		return "down: " + m.Error
	case p != nil && (p.State == raft.StateStalled || p.State == raft.StateDiverged):
		s := p.State
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		if p.Detail != "" {
			s += " (" + p.Detail + ")"
		}
		return s
	case p != nil && p.Installing:
		return fmt.Sprintf("receiving the leader's snapshot: %d of %d bytes left, %.0f B/s%s", p.SnapshotBytesRemaining, p.SnapshotSize, p.BytesPerSecond, eta(p.ETA))
	case p != nil && p.State == raft.StateCatchingUp:
		return fmt.Sprintf("catching up: %d entries behind, %.0f entries/s%s", p.Lag, p.EntriesPerSecond, eta(p.ETA))
	case st.Diverged != nil:
		return fmt.Sprintf("diverged at index %d: re-seed this member", st.Diverged.Index)
	case st.LeaderID == "":
		return fmt.Sprintf("no leader known: cannot tell (applied %d, its commit %d)", st.AppliedIndex, st.CommitIndex)
	case !m.Voter:
		return "non-voter: catching up"
	case m.LagKnown && m.Lag > 0:
		return fmt.Sprintf("catching up: %d entries behind the leader", m.Lag)
	case st.AppliedIndex < st.CommitIndex:
		return fmt.Sprintf("applying: %d of commit %d", st.AppliedIndex, st.CommitIndex)
	default:
		return "caught up"
	}
}

// eta renders a catch-up ETA (negative: unknown; zero: nothing remains).
func eta(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return ", done in about " + d.Round(100*time.Millisecond).String()
}

// GET /console/cluster: every member as the status RPC reports it (a
// member that does not answer within 2 s is down), the quorum this member
// reaches, and the last walcompare run through this jobd (console or API).
func (c *console) clusterPage(w http.ResponseWriter, r *http.Request, p *page) error {
	h := c.health(r.Context(), healthTTL)
	p.Health = h
	p.Title, p.Nav, p.Live = "Cluster", "cluster", "cluster"
	p.Data = map[string]any{"Members": h.Members, "Self": h.self, "Compare": c.cmp.get(), "ClusterID": c.s.clusterID}
	c.render(w, http.StatusOK, "cluster", p)
	return nil
}

// POST /console/cluster/walcompare: compares the members' logs online, as
// GET /v1/cluster/walcompare does, and keeps the result for the page.
func (c *console) runCompare(w http.ResponseWriter, r *http.Request, _ *page) error {
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	var members []walcompare.Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for _, m := range c.s.ctl.Node().Status().Members {
		lm, err := walcompare.Dial(ctx, m.ID, m.Address, c.s.clusterTLS)
		if err != nil {
			c.cmp.set(compareRun{At: start, By: "console", Took: time.Since(start), Err: fmt.Sprintf("member %s (%s): %v", m.ID, m.Address, err)})
			done(w, r, "/console/cluster", nil, "walcompare failed: member "+m.ID+" unreachable")
			return nil
		}
		members = append(members, lm)
	}
	rep, err := walcompare.Compare(ctx, members, walcompare.Options{})
	if err != nil {
		c.cmp.set(compareRun{At: start, By: "console", Took: time.Since(start), Err: err.Error()})
		done(w, r, "/console/cluster", nil, "walcompare failed")
		return nil
	}
	c.cmp.set(compareRun{At: start, By: "console", Took: time.Since(start), Report: rep})
	done(w, r, "/console/cluster", nil, fmt.Sprintf("walcompare: %d committed divergences", rep.CommittedCount))
	return nil
}

// compareRun is one walcompare run.
type compareRun struct {
	At     time.Time
	By     string // console or API
	Took   time.Duration
	Report *walcompare.Report
	Err    string
}

// lastCompare holds the last walcompare run through this jobd.
type lastCompare struct {
	mu  sync.Mutex
	run *compareRun
}

func (l *lastCompare) set(r compareRun) {
	r.Took = r.Took.Round(100 * time.Microsecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run = &r
}

func (l *lastCompare) get() *compareRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run
}

// POST /console/cluster/add (id, address): starts adding a member, as POST
// /v1/cluster/members does (the same checks, the same wait until it is in
// the configuration); it joins as a non-voter and the leader's catch-up
// policy promotes it: the page shows its progress.
func (c *console) addMember(w http.ResponseWriter, r *http.Request, _ *page) error {
	id, addr := strings.TrimSpace(r.PostForm.Get("id")), strings.TrimSpace(r.PostForm.Get("address"))
	node := c.s.ctl.Node()
	voter, err := checkAdd(node, id, addr)
	if err != nil {
		return err
	}
	if voter {
		done(w, r, "/console/cluster", nil, "member "+id+" is already a voter at "+addr)
		return nil
	}
	if _, err := c.s.startAdd(r.Context(), id, addr); err != nil {
		return err // refused (another cluster, not answering) or not added in time
	}
	done(w, r, "/console/cluster", nil, "adding member "+id+" at "+addr+": it joins as a non-voter, promoted once caught up")
	return nil
}

// POST /console/cluster/remove (id): removes a member, as DELETE
// /v1/cluster/members/{id} does.
func (c *console) removeMember(w http.ResponseWriter, r *http.Request, _ *page) error {
	id := r.PostForm.Get("id")
	if err := checkMemberID(id); err != nil {
		return err
	}
	node := c.s.ctl.Node()
	if !slices.ContainsFunc(node.Status().Members, func(m raft.Member) bool { return m.ID == id }) {
		return &clientError{code: http.StatusNotFound, kind: "not_found", reason: fmt.Sprintf("no member %q in the configuration", id)}
	}
	c.s.adds.stop(id)
	ctx, cancel := context.WithTimeout(r.Context(), addTimeout)
	defer cancel()
	if err := node.RemoveMember(ctx, id); err != nil {
		return memberError(err)
	}
	done(w, r, "/console/cluster", nil, "member "+id+" removed")
	return nil
}
