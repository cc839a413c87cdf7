package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// Member is one member of a test cluster as the cluster's checks see it:
// a raft node or a controller, in this process or in a child process.
// Every cluster of this package hands its members to a Group through it.
type Member interface {
	// ID is the member's raft server ID.
	ID() string
	// Up reports whether the harness started the member and has not
	// stopped or killed it. A child process that died on its own is still
	// up: its silence fails the waits.
	Up() bool
	// Status is the member's raft status; an error means no answer.
	Status(ctx context.Context) (raft.Status, error)
	// LinearizableRead runs a linearizable read on the member: nil means
	// it could serve one (as leader, or through one).
	LinearizableRead(ctx context.Context) error
	// Log opens the member's log for reading (the applied checker's
	// reference); the caller closes it.
	Log(ctx context.Context) (walcompare.Member, error)
	// Applied is the member's applied history (nil: it records none).
	Applied() history.Source
}

// Policy is what differs between the clusters' checks.
type Policy struct {
	// ServingLeader: WaitLeader waits for a leader that serves a
	// linearizable read (the first entry of its term committed), not only
	// one that says it leads.
	ServingLeader bool
	// AppliedEvery throttles the applied-history check the waits run on
	// every poll (0: every poll): a child process's check reads history
	// files and the leader's new entries over RPC.
	AppliedEvery time.Duration
	// FinalNeedsLeader: a final applied check without a running leader
	// fails; otherwise it checks against the member with the highest
	// commit index.
	FinalNeedsLeader bool
}

// Group holds the one set of cluster checks: who leads, waiting for a
// leader, waiting for the members to converge, and the applied-history
// checks. Each cluster of this package embeds one over its members.
type Group struct {
	t       testing.TB
	members func() []Member
	policy  Policy

	applied   *history.Checker
	appliedAt atomic.Int64 // unix ns of the last throttled applied check
}

// NewGroup returns the checks over members (called afresh by every check:
// a cluster may grow).
func NewGroup(t testing.TB, members func() []Member, p Policy) *Group {
	return &Group{t: t, members: members, policy: p, applied: history.NewChecker()}
}

// quickStatus is m's status, asked with a short timeout.
func quickStatus(m Member) (raft.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return m.Status(ctx)
}

// leaderAbove returns the up member that reports itself leader in the
// highest term above minTerm, with its status, or -1.
func (g *Group) leaderAbove(minTerm uint64) (int, raft.Status) {
	best, st := -1, raft.Status{}
	for i, m := range g.members() {
		if !m.Up() {
			continue
		}
		s, err := quickStatus(m)
		if err == nil && s.Role == "Leader" && s.Term > minTerm && (best < 0 || s.Term > st.Term) {
			best, st = i, s
		}
	}
	return best, st
}

// Leader returns the index of the member leading in the highest term, or
// -1.
func (g *Group) Leader() int { l, _ := g.leaderAbove(0); return l }

// WaitLeader waits for a leader (one serving a linearizable read, under
// Policy.ServingLeader) and returns its index.
func (g *Group) WaitLeader(d time.Duration) int {
	g.t.Helper()
	var l int
	WaitFor(g.t, d, "a leader", func() bool {
		l = g.Leader()
		if l < 0 || !g.policy.ServingLeader {
			return l >= 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return g.members()[l].LinearizableRead(ctx) == nil
	})
	return l
}

// LeaderAbove waits for a member that reports itself leader in a term
// above minTerm, and returns its index and status.
func (g *Group) LeaderAbove(d time.Duration, minTerm uint64) (int, raft.Status) {
	g.t.Helper()
	var l int
	var st raft.Status
	WaitFor(g.t, d, fmt.Sprintf("a leader in a term above %d", minTerm), func() bool {
		l, st = g.leaderAbove(minTerm)
		return l >= 0
	})
	return l, st
}

// Running returns the indexes of the members that are up.
func (g *Group) Running() []int {
	var out []int
	for i, m := range g.members() {
		if m.Up() {
			out = append(out, i)
		}
	}
	return out
}

// WaitConverged waits until the statuses of every member that is up
// Agree (the same commit, last and applied index, and state digest), and
// returns their common status. It checks the applied histories while it
// polls (throttled by Policy.AppliedEvery) and fails the test at once on
// a violation.
func (g *Group) WaitConverged(d time.Duration) raft.Status {
	g.t.Helper()
	return g.WaitConvergedOf(d, g.Running()...)
}

// WaitConvergedOf is WaitConverged over the given members only (a removed
// or cut-off member is left out); a given member that is not up is
// skipped.
func (g *Group) WaitConvergedOf(d time.Duration, members ...int) raft.Status {
	g.t.Helper()
	var last []raft.Status
	var first raft.Status
	converged := func() bool {
		g.failOnApplied(false)
		last = last[:0]
		ms := g.members()
		for _, i := range members {
			if !ms[i].Up() {
				continue
			}
			s, err := quickStatus(ms[i])
			if err != nil {
				return false
			}
			last = append(last, s)
		}
		if !Agree(last) {
			return false
		}
		first = last[0]
		return true
	}
	w := stalltest.Start()
	for !converged() {
		if w.Exceeded(d) {
			g.failOnApplied(true) // a violation is named, never reported as a timeout
			for _, s := range last {
				g.t.Logf("%s: role %s term %d first %d last %d/%d commit %d applied %d floor %d digest %d/%x",
					s.ID, s.Role, s.Term, s.FirstIndex, s.LastIndex, s.LastTerm, s.CommitIndex, s.AppliedIndex, s.Floor, s.Digest.Index, s.Digest.Sum[:4])
			}
			g.t.Fatalf("timed out after %s waiting for members to converge", w.Report(d))
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	g.failOnApplied(true)
	return first
}

// Agree reports whether statuses agree as a converged cluster's do: the
// same commit index, last index, applied index (above 0) and state digest.
func Agree(sts []raft.Status) bool {
	if len(sts) == 0 || sts[0].AppliedIndex == 0 {
		return false
	}
	for _, s := range sts[1:] {
		if s.CommitIndex != sts[0].CommitIndex || s.LastIndex != sts[0].LastIndex ||
			s.AppliedIndex != sts[0].AppliedIndex || s.Digest != sts[0].Digest {
			return false
		}
	}
	return true
}

// errNoReference: no running member to check the applied histories
// against.
var errNoReference = errors.New("clustertest: no running member to check the applied histories against")
