package proctest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// HistoryPath is where a member process records its applied history (an
// append-only history.File in its data dir, which survives SIGKILL).
func HistoryPath(dataDir string) string { return filepath.Join(dataDir, history.FileName) }

// appliedCheckEvery throttles the applied-history check of the
// convergence wait: each one reads the members' history files and the
// leader's new log entries over RPC.
const appliedCheckEvery = 250 * time.Millisecond

// CheckApplied checks every member's applied history (running or not: the
// files outlive the processes) against the log of the running member
// leading in the highest term, read over its RPC channel (walcompare.Dial),
// up to its commit index; final once the run is over (see
// history.Checker.Check). It needs a running member; with no leader a
// running check does nothing and a final one uses the member with the
// highest commit index. A read error fails the test in a final check and
// skips a running one.
func (h *Harness) CheckApplied(final bool) []history.Violation {
	h.t.Helper()
	vs, err := h.checkApplied(final)
	if err != nil && final {
		h.t.Fatalf("applied-history check: %v", err)
	}
	return vs
}

// AppliedStats returns what the harness's applied-history checks covered.
func (h *Harness) AppliedStats() history.Stats { return h.applied.Stats() }

func (h *Harness) checkApplied(final bool) ([]history.Violation, error) {
	var lead, high *Member
	var ls, hs raft.Status
	for _, m := range h.Members {
		if !m.Running() {
			continue
		}
		s, err := m.statusQuick()
		if err != nil {
			continue
		}
		if s.Role == "Leader" && (lead == nil || s.Term > ls.Term) {
			lead, ls = m, s
		}
		if high == nil || s.CommitIndex > hs.CommitIndex {
			high, hs = m, s
		}
	}
	ref, st := lead, ls
	if ref == nil {
		if !final {
			return nil, nil
		}
		if ref, st = high, hs; ref == nil {
			return nil, fmt.Errorf("no running member answers to check the applied histories against")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, err := walcompare.Dial(ctx, ref.Cfg.ID, ref.Cfg.BindAddr, nil)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	srcs := make([]history.Source, len(h.Members))
	for i, m := range h.Members {
		srcs[i] = history.FileSource(m.Cfg.ID, HistoryPath(m.Cfg.DataDir))
	}
	return h.applied.Check(ctx, history.Reference{Name: ref.Cfg.ID, Log: nodetest.ReferenceLog(log), Commit: st.CommitIndex}, final, srcs...)
}

// failOnApplied fails the test at once on an applied-history violation;
// the convergence wait calls it while it polls, throttled unless force (at
// convergence, and before a timeout: a violation is named, never reported
// as a timeout).
func (h *Harness) failOnApplied(force bool) {
	h.t.Helper()
	now := time.Now().UnixNano()
	if last := h.appliedAt.Load(); !force && (now-last < int64(appliedCheckEvery) || !h.appliedAt.CompareAndSwap(last, now)) {
		return
	}
	if vs := h.CheckApplied(false); len(vs) > 0 {
		h.t.Fatal(nodetest.ViolationReport(vs))
	}
}
