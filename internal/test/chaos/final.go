package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// live returns the members expected up in the final phase: the voters
// (removed members and spares never added are out), but those left down
// after a bit flip.
func (r *runner) live() []int {
	voters := r.members.votersSnapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, i := range voters {
		if !r.refused[i] {
			out = append(out, i)
		}
	}
	return out
}

// finalPhase waits for a leader and for the live members to converge
// (clustertest.Agree: equal commit, last and applied index and digest), then runs the final applied-history
// check and reads every live member's jobs.
func (r *runner) finalPhase(healAt time.Duration) []Verdict {
	var out []Verdict
	w := stalltest.Start()
	if !r.waitMembership(func() bool { return w.Exceeded(r.o.Converge) }) {
		return append(out, Verdict{Checker: "membership", At: r.since(), Detail: fmt.Sprintf("%d membership changes not completed %s after the heal", r.members.busy(), w.Report(r.o.Converge))})
	}
	var last []clustertest.Reply
	for {
		r.watchExits()
		r.mu.Lock()
		var died []int
		for i := range r.down {
			if r.down[i] && !r.refused[i] && !r.members.isRemoved(i) {
				if r.flipped[i] {
					r.refused[i] = true // it refused to start after its bit flip: a minority left down
				} else {
					died = append(died, i)
				}
			}
		}
		r.mu.Unlock()
		if len(died) > 0 {
			return append(out, Verdict{Checker: "convergence", At: r.since(), Detail: fmt.Sprintf("members %v exited in the final phase, no fault in force; logs: %v", died, r.p.Logs())})
		}
		ok, leader := true, false
		last = last[:0]
		var sts []raft.Status
		lead, leadTerm := -1, uint64(0)
		for _, i := range r.live() {
			rep, err := r.p.CallT(i, "/status", clustertest.Request{}, time.Second)
			if err != nil {
				ok = false
				break
			}
			if rep.Diverged != nil {
				r.mu.Lock()
				if r.diverged[i] == nil {
					r.diverged[i] = rep.Diverged
				}
				r.mu.Unlock()
			}
			if rep.Role == "Leader" && rep.Term >= leadTerm {
				lead, leadTerm = i, rep.Term
			}
			if r.setAside(i) {
				continue // a diverged member of a lie run: honest judges it
			}
			st, err := rep.Status(r.p.Cfgs[i].ID)
			if err != nil {
				ok = false
				break
			}
			last, sts = append(last, rep), append(sts, st)
			leader = leader || rep.Role == "Leader"
		}
		if lead >= 0 {
			r.mu.Lock()
			r.finalLead = lead
			r.mu.Unlock()
		}
		if ok && leader && clustertest.Agree(sts) {
			break
		}
		if w.Exceeded(r.o.Converge) {
			var b strings.Builder
			for _, s := range last {
				fmt.Fprintf(&b, " [%s term %d commit %d applied %d digest %d/%.8s%s]", s.Role, s.Term, s.Commit, s.Applied, s.DigestIndex, s.Digest, divergedText(s))
			}
			return append(out, Verdict{Checker: "convergence", At: r.since(), Detail: fmt.Sprintf("not converged %s after the heal at %s:%s", w.Report(r.o.Converge), healAt.Round(time.Millisecond), b.String())})
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	out = append(out, Verdict{Checker: "convergence", OK: true, Detail: fmt.Sprintf("at applied index %d, %s after the heal", last[0].Applied, (r.since() - healAt).Round(time.Millisecond))})
	r.converged = last[0].Applied
	for _, rep := range last {
		if rep.Role == "Leader" {
			if v := r.checkVoters(rep); v != nil {
				out = append(out, *v)
			} else {
				out = append(out, Verdict{Checker: "membership", OK: true, Detail: fmt.Sprintf("voters %v", rep.Voters)})
			}
			break
		}
	}

	vs, err := r.p.AppliedViolations(true)
	switch {
	case err != nil:
		out = append(out, Verdict{Checker: "applied", At: r.since(), Detail: "final check: " + err.Error()})
	default:
		for _, v := range vs {
			out = append(out, Verdict{Checker: "applied", At: r.since(), Detail: v.String(), Members: r.slotsOf(v.Member, v.Other)})
		}
	}
	r.lists = map[int][]clustertest.JobView{}
	for _, i := range r.judged() {
		var jobs []clustertest.JobView
		for _, q := range append([]string{bulkQueue}, modelQueues()...) {
			rep, err := r.p.CallT(i, "/list", clustertest.Request{Queue: q, Local: true}, 10*time.Second)
			if err != nil || rep.Outcome != clustertest.OutcomeOK {
				out = append(out, Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d: list %s: %v %s", i, q, err, rep.Error)})
				break
			}
			jobs = append(jobs, rep.Jobs...)
		}
		r.lists[i] = jobs
	}
	return append(out, r.listDeps()...)
}

func modelQueues() []string {
	var out []string
	for k := 0; k < modelJobs; k++ {
		out = append(out, fmt.Sprintf("mq-%d", k))
	}
	return out
}

// walCompare stops every member (SIGKILL) and compares the live members'
// logs on disk: no committed divergence, no payload lost. Members left
// down after a bit flip are left out (their damage is the fault), and so
// are, in a lie run, the members that reported Diverged (honest judges
// them).
func (r *runner) walCompare() Verdict {
	for i := 0; i < r.s.Slots(); i++ {
		r.p.Kill(i)
	}
	var ms []walcompare.Member
	for _, i := range r.judged() {
		m, err := walcompare.OpenDir(fmt.Sprintf("m%d", i), r.p.Cfgs[i].DataDir)
		if err != nil {
			return Verdict{Checker: "walcompare", At: r.since(), Detail: err.Error()}
		}
		ms = append(ms, m)
	}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := walcompare.Compare(ctx, ms, walcompare.Options{})
	if err != nil {
		return Verdict{Checker: "walcompare", At: r.since(), Detail: err.Error()}
	}
	if cd := rep.CommittedDivergences(); len(cd) > 0 {
		d := cd[0]
		return Verdict{Checker: "walcompare", At: r.since(), Index: d.Index,
			Detail: fmt.Sprintf("%d committed divergences (boundary %d, %s), first %s at [%d, %d)", len(cd), rep.Committed, rep.CommittedBasis, d.Class, d.Index, d.End)}
	}
	if n := rep.Summary[walcompare.PayloadLost]; n > 0 {
		return Verdict{Checker: "walcompare", At: r.since(), Detail: fmt.Sprintf("%d payloads lost", n)}
	}
	return Verdict{Checker: "walcompare", OK: true, Detail: fmt.Sprintf("[%d, %d) committed %d (%s)", rep.From, rep.End, rep.Committed, rep.CommittedBasis)}
}

// divergedText describes a member's reported divergence ("" when none).
func divergedText(s clustertest.Reply) string {
	if d := s.Diverged; d != nil {
		return fmt.Sprintf(" diverged at %d (its term %d, leader %s term %d, floor %d; guard refusals %d)", d.Index, d.LocalTerm, d.Leader, d.LeaderTerm, d.Floor, s.GuardRefusals)
	}
	return ""
}
