package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// provenLease is a lease of the limit queue the acknowledged history
// proves running throughout [from, to]: its claim returned ok at from
// (it was granted before), and an ack or nak of it returned ok, called at
// to (it was still running when that applied, after its call).
type provenLease struct {
	job, kind string
	token     uint64
	from, to  time.Duration
}

// provenLeases reads the limit queue's proven leases from ops. In a lie
// run (lieAt >= 0) a claim or settle that returned at or after lieAt may
// have been lost by the fault: those leases are left out (counted).
func provenLeases(ops []Op, lieAt time.Duration) (proven []provenLease, excused int) {
	type key struct {
		job   string
		token uint64
	}
	claims := map[key]Op{}
	for _, op := range ops {
		if op.Kind == "lclaim" && op.Outcome == clustertest.OutcomeOK && op.Job != "" {
			claims[key{op.Job, op.Token}] = op
		}
	}
	for _, op := range ops {
		if (op.Kind != "lack" && op.Kind != "lnak") || op.Outcome != clustertest.OutcomeOK {
			continue
		}
		c, ok := claims[key{op.Job, op.Token}]
		if !ok || c.Return >= op.Call {
			continue // nothing proven: no overlap can be shown
		}
		if lieAt >= 0 && (c.Return >= lieAt || op.Return >= lieAt) {
			excused++
			continue
		}
		kind := ""
		if len(c.Tags) == 1 {
			kind = c.Tags[0]
		}
		proven = append(proven, provenLease{job: op.Job, kind: kind, token: op.Token, from: c.Return, to: op.Call})
	}
	return proven, excused
}

// mostOverlapping returns the largest set of leases running together (all
// proven running at one instant): a sweep over their intervals, an end
// before a start at the same instant.
func mostOverlapping(ls []provenLease) (most []provenLease, at time.Duration) {
	type edge struct {
		t     time.Duration
		start bool
		i     int
	}
	var edges []edge
	for i, l := range ls {
		edges = append(edges, edge{l.from, true, i}, edge{l.to, false, i})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].t != edges[b].t {
			return edges[a].t < edges[b].t
		}
		return !edges[a].start && edges[b].start
	})
	open := map[int]bool{}
	for _, e := range edges {
		if !e.start {
			delete(open, e.i)
			continue
		}
		open[e.i] = true
		if len(open) > len(most) {
			most, at = most[:0], e.t
			for i := range open {
				most = append(most, ls[i])
			}
		}
	}
	sort.Slice(most, func(a, b int) bool { return most[a].from < most[b].from })
	return most, at
}

// limitCheck: the running leases of the limited queue, and of its limited
// kind, never outnumber their limits in the acknowledged history (judged
// conservatively: only leases proven running at one instant count).
func limitCheck(ops []Op, p *limitPlan, lieAt time.Duration) Verdict {
	if p == nil {
		return Verdict{Checker: "limit", OK: true, Detail: "not checked: no limits workload"}
	}
	select {
	case <-p.set:
	default:
		return Verdict{Checker: "limit", OK: true, Detail: "not checked: the limits were never acknowledged"}
	}
	all, excused := provenLeases(ops, lieAt)
	var kindOnly []provenLease
	for _, l := range all {
		if l.kind == limitedKind {
			kindOnly = append(kindOnly, l)
		}
	}
	most, at := mostOverlapping(all)
	mostKind, atKind := mostOverlapping(kindOnly)
	fail := func(what string, limit int, ls []provenLease, t time.Duration) Verdict {
		var b strings.Builder
		for _, l := range ls {
			fmt.Fprintf(&b, " %s/t%d (%s) claimed by %s, settle called at %s;", l.job, l.token, l.kind, l.from.Round(time.Millisecond), l.to.Round(time.Millisecond))
		}
		return Verdict{Checker: "limit", At: t, Index: ls[0].token,
			Detail: fmt.Sprintf("%d leases of %s ran together at %s under a limit of %d:%s", len(ls), what, t.Round(time.Millisecond), limit, b.String())}
	}
	if len(most) > p.queueMax {
		return fail("queue "+limitQueue, p.queueMax, most, at)
	}
	if len(mostKind) > p.kindMax {
		return fail("kind "+limitedKind+" of queue "+limitQueue, p.kindMax, mostKind, atKind)
	}
	detail := fmt.Sprintf("%d proven leases: at most %d together (queue limit %d), %d of kind %s (limit %d)", len(all), len(most), p.queueMax, len(mostKind), limitedKind, p.kindMax)
	if lieAt >= 0 {
		detail += fmt.Sprintf("; %d excused (acknowledged at or after the lie began at %s)", excused, lieAt.Round(time.Millisecond))
	}
	return Verdict{Checker: "limit", OK: true, Detail: detail, Judged: len(all)}
}

// uniqueCheck: no two jobs were created for one unique key (payload and
// period window) while one held it. On every judged member's final state:
// of a key's jobs in submit order, each but the last left its chosen
// states (it holds the key no more) no later than the next was created,
// and a job holds its key exactly while its state is among them (the
// workload never retries a unique job, so none comes back to them).
func uniqueCheck(lists map[int][]clustertest.JobView) Verdict {
	if lists == nil {
		return Verdict{Checker: "unique", OK: true, Detail: "not checked: the members did not converge"}
	}
	members := make([]int, 0, len(lists))
	for i := range lists {
		members = append(members, i)
	}
	sort.Ints(members)
	jobs, keys := 0, 0
	for _, m := range members {
		groups := map[string][]clustertest.JobView{}
		for _, j := range lists[m] {
			if j.Unique == nil {
				return Verdict{Checker: "unique", At: 0, Detail: fmt.Sprintf("m%d: job %s of queue %s has no unique key", m, j.ID, j.Queue)}
			}
			if held := strings.Contains(","+j.Unique.States+",", ","+j.State+","); held != j.Unique.Held {
				return Verdict{Checker: "unique", Detail: fmt.Sprintf("m%d: job %s is %s (unique states %s) and holds its key: %v", m, j.ID, j.State, j.Unique.States, j.Unique.Held)}
			}
			k := j.Payload + "@" + j.Unique.Window.Format(time.RFC3339Nano)
			groups[k] = append(groups[k], j)
		}
		if m == members[0] {
			jobs, keys = len(lists[m]), len(groups)
		}
		for k, g := range groups {
			sort.Slice(g, func(a, b int) bool { return g[a].Seq < g[b].Seq })
			for i := 1; i < len(g); i++ {
				prev, next := g[i-1], g[i]
				if prev.Unique.Held || prev.Finished.IsZero() || prev.Finished.After(next.Created) {
					finished := "not finished"
					if !prev.Finished.IsZero() {
						finished = "finished " + prev.Finished.Format(time.StampMilli)
					}
					return Verdict{Checker: "unique", Detail: fmt.Sprintf("m%d: key %s: job %s (%s, %s, holds it: %v) and job %s created %s: two jobs for one key while the first held it",
						m, k, prev.ID, prev.State, finished, prev.Unique.Held, next.ID, next.Created.Format(time.StampMilli))}
				}
			}
		}
	}
	return Verdict{Checker: "unique", OK: true, Detail: fmt.Sprintf("%d unique jobs under %d keys on %d members", jobs, keys, len(members)), Judged: jobs}
}

// uniqueLists reads every judged member's unique queue.
func (r *runner) uniqueLists() (map[int][]clustertest.JobView, *Verdict) {
	if r.lists == nil {
		return nil, nil
	}
	out := map[int][]clustertest.JobView{}
	for _, i := range r.judged() {
		rep, err := r.p.CallT(i, "/list", clustertest.Request{Queue: uniqueQueue, Local: true}, 10*time.Second)
		if err != nil || rep.Outcome != clustertest.OutcomeOK {
			return nil, &Verdict{Checker: "unique", At: r.since(), Detail: fmt.Sprintf("m%d: list %s: %v %s", i, uniqueQueue, err, rep.Error)}
		}
		out[i] = rep.Jobs
	}
	return out, nil
}

// limitsChecks runs the limit and unique checkers.
func (r *runner) limitsChecks(ops []Op, lieAt time.Duration) []Verdict {
	out := []Verdict{limitCheck(ops, r.wl.limits, lieAt)}
	lists, bad := r.uniqueLists()
	if bad != nil {
		return append(out, *bad)
	}
	return append(out, uniqueCheck(lists))
}
