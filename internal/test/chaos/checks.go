package chaos

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/jobmodel"
)

// finalChecks runs the checkers that judge the whole recorded run.
func (r *runner) finalChecks() []Verdict {
	ops := r.wl.all()
	lieAt, _, lied := r.firstLie()
	if !lied {
		lieAt = -1
	}
	out := []Verdict{r.ackedSet(ops, lieAt), fencing(ops, lieAt), r.linearizable(lieAt), r.liveness(), r.leaderWait(ops),
		depsOrder(ops), r.batchOnce(ops), r.scheduleCheck(ops, lieAt)}
	out = append(out, r.limitsChecks(ops, lieAt)...) // checks_limits.go
	return append(out, r.walCompare(), r.honest())
}

// ackedSet: every bulk submit acknowledged (ok) exists exactly once on
// every live member, one whose outcome is unknown at most once, one
// refused (not_submitted) never; no job exists that no client submitted;
// every model job whose submit was acknowledged exists. In a lie run
// (lieAt >= 0: the earliest lie began then) an acknowledged submit that
// returned at or after lieAt may have been committed with the lying
// member's acknowledgement only, and is lost by the fault when it is
// missing: excused (counted); everything else holds.
func (r *runner) ackedSet(ops []Op, lieAt time.Duration) Verdict {
	if r.lists == nil {
		return Verdict{Checker: "acked-set", OK: true, Detail: "not checked: the members did not converge"}
	}
	want := map[string]string{} // tag → outcome
	ret := map[string]time.Duration{}
	models := map[string]time.Duration{} // model job → when its first acknowledged submit returned
	for _, op := range ops {
		switch {
		case op.Kind == "submit" && len(op.Tags) == 1, op.Kind == "batch-job":
			want[op.Tags[0]], ret[op.Tags[0]] = op.Outcome, op.Return
		case op.Kind == "submit" && op.Outcome == clustertest.OutcomeOK:
			if at, ok := models[op.Job]; !ok || op.Return < at {
				models[op.Job] = op.Return
			}
		}
	}
	lost := func(at time.Duration) bool { return lieAt >= 0 && at >= lieAt } // the lie's to lose
	excused := 0
	acked := 0
	for _, o := range want {
		if o == clustertest.OutcomeOK {
			acked++
		}
	}
	members := make([]int, 0, len(r.lists))
	for i := range r.lists {
		members = append(members, i)
	}
	sort.Ints(members)
	for _, i := range members {
		count := map[string]int{}
		ids := map[string]bool{}
		for _, j := range r.lists[i] {
			ids[j.ID] = true
			if j.Queue != bulkQueue {
				// A model queue mq-k holds one job, mj-k, however often
				// it was submitted.
				if want := "mj-" + strings.TrimPrefix(j.Queue, "mq-"); j.ID != want {
					return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d holds job %s in queue %s, where only %s was ever submitted: a submit of an existing ID created a second job", i, j.ID, j.Queue, want)}
				}
				continue
			}
			count[j.Payload]++
			o, ok := want[j.Payload]
			if !ok {
				return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d holds job %s (payload of %d bytes) that no client submitted", i, j.ID, len(j.Payload))}
			}
			if o == clustertest.OutcomeNotSubmitted && count[j.Payload] == 1 {
				return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d holds job %s whose submit was answered not_submitted (tag %s)", i, j.ID, j.Payload)}
			}
			if count[j.Payload] > 1 {
				return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d holds tag %s %d times (submit outcome %s): not exactly once", i, j.Payload, count[j.Payload], o)}
			}
		}
		for tag, o := range want {
			if o == clustertest.OutcomeOK && count[tag] != 1 {
				if count[tag] == 0 && lost(ret[tag]) {
					excused++
					continue
				}
				return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d lost acknowledged submit %s", i, tag)}
			}
		}
		for id, at := range models {
			if !ids[id] {
				if lost(at) {
					excused++
					continue
				}
				return Verdict{Checker: "acked-set", At: r.since(), Detail: fmt.Sprintf("m%d lost acknowledged model job %s", i, id)}
			}
		}
	}
	detail := fmt.Sprintf("%d acknowledged of %d submitted, on %d members", acked, len(want), len(members))
	if lieAt >= 0 {
		detail += fmt.Sprintf("; %d losses (member × job) excused: acknowledged at or after the lie began at %s", excused, lieAt.Round(time.Millisecond))
	}
	return Verdict{Checker: "acked-set", OK: true, Detail: detail}
}

// fencing: no ack or extend is accepted on a lease that was already
// superseded when the call was made: by a claim of the same job with a
// higher token, or by a cancel, that had returned ok. In a lie run (lieAt
// >= 0) a superseding claim or cancel that returned at or after lieAt may
// be lost by the fault, and what it superseded with it: excused.
func fencing(ops []Op, lieAt time.Duration) Verdict {
	type claim struct {
		token uint64
		ret   time.Duration
	}
	claims := map[string][]claim{}
	cancels := map[string][]time.Duration{}
	for _, op := range ops {
		if op.Outcome != clustertest.OutcomeOK {
			continue
		}
		switch op.Kind {
		case "claim":
			if op.Job != "" {
				claims[op.Job] = append(claims[op.Job], claim{op.Token, op.Return})
			}
		case "cancel":
			cancels[op.Job] = append(cancels[op.Job], op.Return)
		}
	}
	checked, excused := 0, 0
	lost := func(at time.Duration) bool { return lieAt >= 0 && at >= lieAt }
	for _, op := range ops {
		if op.Outcome != clustertest.OutcomeOK || (op.Kind != "ack" && op.Kind != "extend") {
			continue
		}
		checked++
		for _, c := range claims[op.Job] {
			if c.token > op.Token && c.ret < op.Call && lost(c.ret) {
				excused++
				continue
			}
			if c.token > op.Token && c.ret < op.Call {
				return Verdict{Checker: "fencing", At: op.Call, Index: op.Token,
					Detail: fmt.Sprintf("%s of %s with token %d accepted at %s, after a claim with token %d returned at %s", op.Kind, op.Job, op.Token, op.Call.Round(time.Millisecond), c.token, c.ret.Round(time.Millisecond))}
			}
		}
		for _, at := range cancels[op.Job] {
			if at < op.Call && lost(at) {
				excused++
				continue
			}
			if at < op.Call {
				return Verdict{Checker: "fencing", At: op.Call, Index: op.Token,
					Detail: fmt.Sprintf("%s of %s with token %d accepted at %s, after its cancel returned at %s", op.Kind, op.Job, op.Token, op.Call.Round(time.Millisecond), at.Round(time.Millisecond))}
			}
		}
	}
	detail := fmt.Sprintf("%d accepted acks and extends", checked)
	if lieAt >= 0 {
		detail += fmt.Sprintf("; %d excused (superseded by a claim or cancel acknowledged at or after the lie began at %s)", excused, lieAt.Round(time.Millisecond))
	}
	return Verdict{Checker: "fencing", OK: true, Detail: detail}
}

// linearizable checks the model jobs' history with porcupine; on a
// violation porcupine's own visualization is written next to the picture.
// In a lie run (lieAt >= 0) it checks the operations called before the
// lie began (beforeLie): an operation that can be lost by the fault was
// committed after lieAt, so it returned after every operation it checks
// was called, and it is not among them.
func (r *runner) linearizable(lieAt time.Duration) Verdict {
	ops := r.wl.rec.Ops()
	if lieAt >= 0 {
		all := len(ops)
		ops, open := beforeLie(ops, int64(lieAt-r.wl.recAt)) // on rec's clock, at or before lieAt
		v := r.checkLinearizable(ops)
		v.Detail += fmt.Sprintf(" (called before the lie began at %s, %d of them still open then; %d later excused)",
			lieAt.Round(time.Millisecond), open, all-len(ops))
		return v
	}
	return r.checkLinearizable(ops)
}

// beforeLie is the part of a history a lie run can check: the operations
// called before cut. One of them still open at cut (it returned later, or
// never) may take effect after it, and a read may see operations called
// after it, which are left out: its outcome is made unknown, as if it had
// never returned (it may or may not have happened, and reads nothing).
// Without that, a read called just before the cut that saw a submit
// called just after it was a violation of the checker's own making (chaos
// seed 1246: "get -> pending" with its submit left out). open counts the
// operations so made unknown.
func beforeLie(ops []porcupine.Operation, cut int64) (checked []porcupine.Operation, open int) {
	checked = slices.DeleteFunc(slices.Clone(ops), func(op porcupine.Operation) bool { return op.Call >= cut })
	for i := range checked {
		if checked[i].Return >= cut && checked[i].Return != math.MaxInt64 {
			checked[i].Output = jobmodel.Output{Outcome: jobmodel.Unknown}
			checked[i].Return = math.MaxInt64
			open++
		}
	}
	return checked, open
}

func (r *runner) checkLinearizable(ops []porcupine.Operation) Verdict {
	res, info := jobmodel.Check(ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
		return Verdict{Checker: "linearizable", OK: true, Detail: fmt.Sprintf("%d operations", len(ops))}
	case porcupine.Unknown:
		return Verdict{Checker: "linearizable", OK: true, Detail: fmt.Sprintf("inconclusive: porcupine timed out on %d operations", len(ops))}
	}
	detail := fmt.Sprintf("%d operations are not linearizable", len(ops))
	if r.o.PictureDir != "" {
		path := filepath.Join(r.o.PictureDir, fmt.Sprintf("seed-%d-porcupine.html", r.s.Seed))
		err := os.MkdirAll(r.o.PictureDir, 0o755)
		if err == nil {
			err = porcupine.VisualizePath(jobmodel.Model.ToModel(), info, path)
		}
		if err == nil {
			detail += "; porcupine's picture: " + path
		} else {
			detail += "; porcupine's picture not written: " + err.Error()
		}
	}
	return Verdict{Checker: "linearizable", At: r.since(), Detail: detail}
}
