package nodetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// CheckAppliedNodes checks the applied histories in sources against the log
// of the member leading in the highest term among nodes (nil entries are
// stopped members), up to its commit index (history.Checker.Check). With no
// leader a running check does nothing; a final one uses the running member
// with the highest commit index.
func CheckAppliedNodes(ck *history.Checker, nodes []*raft.Node, final bool, sources ...history.Source) ([]history.Violation, error) {
	best, term, commit := -1, uint64(0), uint64(0)
	for i, n := range nodes {
		if n == nil {
			continue
		}
		r := n.Raft()
		if r.State() == hraft.Leader && r.CurrentTerm() >= term {
			best, term = i, r.CurrentTerm()
		}
	}
	if best < 0 && final {
		for i, n := range nodes {
			if n != nil && (best < 0 || n.Raft().CommitIndex() > commit) {
				best, commit = i, n.Raft().CommitIndex()
			}
		}
	}
	if best < 0 {
		if final {
			return nil, fmt.Errorf("no running member to check the applied histories against")
		}
		return nil, nil
	}
	n := nodes[best]
	ref := history.Reference{Name: n.ID(), Log: ReferenceLog(walcompare.FromLogStore(n.ID(), n.Log())), Commit: n.Raft().CommitIndex()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ck.Check(ctx, ref, final, sources...)
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

// CheckApplied checks every member's applied history, running or stopped,
// against the current leader's log (CheckAppliedNodes); final once the run
// is over and the members converged. A read error fails the test in a
// final check and skips a running one.
func (c *Cluster) CheckApplied(final bool) []history.Violation {
	c.t.Helper()
	srcs := make([]history.Source, len(c.Applied))
	for i, m := range c.Applied {
		srcs[i] = m
	}
	vs, err := CheckAppliedNodes(c.applied, c.Nodes, final, srcs...)
	if err != nil && final {
		c.t.Fatalf("applied-history check: %v", err)
	}
	return vs
}

// AppliedStats returns what the cluster's applied-history checks covered.
func (c *Cluster) AppliedStats() history.Stats { return c.applied.Stats() }

// failOnApplied fails the test at once on an applied-history violation:
// it runs on every poll of the convergence waits, so a member applying a
// wrong entry is named when it happens, not as a timeout.
func (c *Cluster) failOnApplied() {
	c.t.Helper()
	if vs := c.CheckApplied(false); len(vs) > 0 {
		c.t.Fatal(ViolationReport(vs))
	}
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
