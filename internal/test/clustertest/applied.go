package clustertest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/walcompare"
)

// HistoryPath is where a member process records its applied history (an
// append-only history.File in its data dir, which survives SIGKILL).
func HistoryPath(dataDir string) string { return filepath.Join(dataDir, history.FileName) }

// AppliedViolations checks every member's applied history (running or
// stopped: a child's file outlives its process) against the log of the up
// member leading in the highest term, up to its commit index
// (history.Checker.Check); final once the run is over and the members
// converged. With no leader a running check does nothing; a final one
// fails under Policy.FinalNeedsLeader and otherwise uses the member with
// the highest commit index. A running check skips what it cannot read; a
// final one returns the error.
func (g *Group) AppliedViolations(final bool) ([]history.Violation, error) {
	ms := g.members()
	lead, high := -1, -1
	var ls, hs uint64 // the leader's term, the highest commit index
	var commit = map[int]uint64{}
	for i, m := range ms {
		if !m.Up() {
			continue
		}
		s, err := quickStatus(m)
		if err != nil {
			continue
		}
		commit[i] = s.CommitIndex
		if s.Role == "Leader" && (lead < 0 || s.Term > ls) {
			lead, ls = i, s.Term
		}
		if high < 0 || s.CommitIndex > hs {
			high, hs = i, s.CommitIndex
		}
	}
	ref := lead
	if ref < 0 {
		if !final {
			return nil, nil
		}
		if ref = high; ref < 0 || g.policy.FinalNeedsLeader {
			return nil, fmt.Errorf("%w (no leader)", errNoReference)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, err := ms[ref].Log(ctx)
	if err != nil {
		if final {
			return nil, err
		}
		return nil, nil
	}
	defer log.Close()
	var srcs []history.Source
	for _, m := range ms {
		if s := m.Applied(); s != nil {
			srcs = append(srcs, s)
		}
	}
	vs, err := g.applied.Check(ctx, history.Reference{Name: ms[ref].ID(), Log: ReferenceLog(log), Commit: commit[ref]}, final, srcs...)
	if err != nil && !final {
		return nil, nil
	}
	return vs, err
}

// CheckApplied is AppliedViolations that fails the test on the error of
// a final check.
func (g *Group) CheckApplied(final bool) []history.Violation {
	g.t.Helper()
	vs, err := g.AppliedViolations(final)
	if err != nil {
		g.t.Fatalf("applied-history check: %v", err)
	}
	return vs
}

// RequireApplied is CheckApplied that also fails the test on a violation;
// a final one logs what the checks covered.
func (g *Group) RequireApplied(final bool) {
	g.t.Helper()
	if vs := g.CheckApplied(final); len(vs) > 0 {
		g.t.Fatal(ViolationReport(vs))
	}
	if final {
		g.t.Logf("applied history: %v", g.applied.Stats())
	}
}

// AppliedStats returns what the applied-history checks covered.
func (g *Group) AppliedStats() history.Stats { return g.applied.Stats() }

// failOnApplied fails the test at once on an applied-history violation;
// the waits call it while they poll, throttled by Policy.AppliedEvery
// unless force (at convergence, and before a timeout).
func (g *Group) failOnApplied(force bool) {
	g.t.Helper()
	if every := g.policy.AppliedEvery; every > 0 && !force {
		now := time.Now().UnixNano()
		if last := g.appliedAt.Load(); now-last < int64(every) || !g.appliedAt.CompareAndSwap(last, now) {
			return
		}
	}
	if vs := g.CheckApplied(false); len(vs) > 0 {
		g.t.Fatal(ViolationReport(vs))
	}
}

// ViolationReport formats violations for a test failure: every one, up to
// a limit.
func ViolationReport(vs []history.Violation) string {
	const limit = 20
	var b strings.Builder
	fmt.Fprintf(&b, "%d applied-history violations (a safety failure):", len(vs))
	for i, v := range vs {
		if i == limit {
			fmt.Fprintf(&b, "\n  ... and %d more", len(vs)-limit)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// ReferenceLog reads a walcompare.Member as the applied-history checker's
// reference log.
func ReferenceLog(m walcompare.Member) history.Log { return referenceLog{m} }

type referenceLog struct{ m walcompare.Member }

func (l referenceLog) ScanEntries(ctx context.Context, from, to uint64, fn func(ix uint64, e history.LogEntry) bool) error {
	return l.m.Scan(ctx, from, to, func(ix uint64, v *walcompare.View) bool {
		return fn(ix, history.LogEntry{Term: v.Term, Type: v.Type, CRC: v.CRC, Corrupt: v.Corrupt})
	})
}
