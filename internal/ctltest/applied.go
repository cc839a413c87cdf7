package ctltest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/walcompare"
)

// historyPath is where a member process records its applied history (an
// append-only history.File in its data dir, which survives SIGKILL).
func historyPath(dataDir string) string { return filepath.Join(dataDir, history.FileName) }

// appliedCheckEvery throttles the applied-history check of WaitConverged.
const appliedCheckEvery = 250 * time.Millisecond

// CheckApplied checks every member's applied history (running or killed:
// the files outlive the processes) against the log of the running member
// leading in the highest term, read over its RPC channel (walcompare.Dial),
// up to its commit index, and fails the test on a violation or a read
// error. final: the run is over (the leader's whole log is the final log);
// it needs a running leader.
func (p *Procs) CheckApplied(final bool) {
	p.t.Helper()
	vs, err := p.checkApplied(final)
	if err != nil {
		p.t.Fatalf("applied-history check: %v", err)
	}
	if len(vs) > 0 {
		p.t.Fatal(nodetest.ViolationReport(vs))
	}
	if final {
		p.t.Logf("applied history: %v", p.applied.Stats())
	}
}

func (p *Procs) checkApplied(final bool) ([]history.Violation, error) {
	lead, st := -1, Reply{}
	for i := range p.cmds {
		if !p.Running(i) {
			continue
		}
		rep, err := p.CallT(i, "/status", Request{}, time.Second)
		if err == nil && rep.Role == "Leader" && (lead < 0 || rep.Term > st.Term) {
			lead, st = i, rep
		}
	}
	if lead < 0 {
		if final {
			return nil, fmt.Errorf("no running leader to check the applied histories against")
		}
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Field by field, never the whole config: the chaos harness changes a
	// member's ClockOffset while this runs.
	leadID := p.Cfgs[lead].ID
	log, err := walcompare.Dial(ctx, leadID, p.Cfgs[lead].RaftAddr, nil)
	if err != nil {
		if final {
			return nil, err
		}
		return nil, nil // a running check skips a member that stopped answering
	}
	defer log.Close()
	srcs := make([]history.Source, len(p.Cfgs))
	for i := range p.Cfgs {
		srcs[i] = history.FileSource(p.Cfgs[i].ID, historyPath(p.Cfgs[i].DataDir))
	}
	vs, err := p.applied.Check(ctx, history.Reference{Name: leadID, Log: nodetest.ReferenceLog(log), Commit: st.Commit}, final, srcs...)
	if err != nil && !final {
		return nil, nil
	}
	return vs, err
}

// failOnApplied fails the test at once on an applied-history violation;
// WaitConverged calls it while it polls, throttled unless force (near its
// deadline: a violation is named, never reported as a timeout).
func (p *Procs) failOnApplied(force bool) {
	p.t.Helper()
	now := time.Now().UnixNano()
	if last := p.appliedAt.Load(); !force && (now-last < int64(appliedCheckEvery) || !p.appliedAt.CompareAndSwap(last, now)) {
		return
	}
	p.CheckApplied(false)
}

// AppliedViolations is CheckApplied that returns what it found instead of
// failing the test (the chaos harness names the checker and goes on).
func (p *Procs) AppliedViolations(final bool) ([]history.Violation, error) {
	return p.checkApplied(final)
}

// AppliedStats returns what the applied-history checks covered.
func (p *Procs) AppliedStats() history.Stats { return p.applied.Stats() }
