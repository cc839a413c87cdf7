package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// A run where a lie took effect (a member restarted with a log that lost
// what it wrote while its disk lied) breaks Raft's stable-storage
// assumption: entries the cluster committed may be gone from every log
// but the honest members that hold them. What the checkers then excuse,
// and what they still require, is in docs/chaos.md ("A lying disk"): in
// short, the verdicts that judge the cluster's one history are taken over
// the members the lie did not touch (touched: a member that lied, or one
// that reported Status.Diverged at the end) and over what happened before
// the first lie began; the touched members are judged by honest.

// firstLie returns the offset the earliest lie that took effect began
// at, the offset of the earliest power loss of one, and false when none
// took effect.
func (r *runner) firstLie() (at, lost time.Duration, ok bool) {
	for k, l := range r.lieRun() {
		if k == 0 {
			at, lost = l.at, l.lost
		}
		at, lost = min(at, l.at), min(lost, l.lost)
		ok = true
	}
	return at, lost, ok
}

// touched reports whether member i's history is the lie's to explain: in
// a lie run, it lied, or it reported Status.Diverged in the final phase.
func (r *runner) touched(i int) bool {
	if _, _, ok := r.firstLie(); !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lied[i] || r.diverged[i] != nil
}

// setAside reports whether the final phase leaves member i out of
// convergence, the job lists and walcompare: in a lie run, a member that
// reports Diverged (honest judges it).
func (r *runner) setAside(i int) bool {
	if _, _, ok := r.firstLie(); !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.diverged[i] != nil
}

// judged returns the live members the cluster-wide final checkers judge:
// live, and not set aside.
func (r *runner) judged() []int {
	var out []int
	for _, i := range r.live() {
		if !r.setAside(i) {
			out = append(out, i)
		}
	}
	return out
}

// excuse passes a run's verdicts through the lie's excuses: in a lie run,
// an applied or digest violation that names a touched member is excused
// (one OK verdict per checker says how many and the first), and the
// digests the untouched members reported are compared again among
// themselves, so that an excused first report hides nothing. Outside lie
// runs it changes nothing.
func (r *runner) excuse(vs []Verdict) (kept, excused []Verdict) {
	if _, _, ok := r.firstLie(); !ok {
		return vs, nil
	}
	count := map[string]int{}
	first := map[string]Verdict{}
	digestAt := map[uint64]bool{}
	for _, v := range vs {
		if !v.OK && (v.Checker == "applied" || v.Checker == "digest") && slices.ContainsFunc(v.Members, r.touched) {
			if count[v.Checker] == 0 {
				first[v.Checker] = v
			}
			count[v.Checker]++
			continue
		}
		if !v.OK && v.Checker == "digest" {
			digestAt[v.Index] = true
		}
		kept = append(kept, v)
	}
	for _, v := range r.obs.untouchedDigests(r.touched) {
		if !digestAt[v.Index] {
			kept = append(kept, v)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(count)) {
		excused = append(excused, Verdict{Checker: c, OK: true,
			Detail: fmt.Sprintf("%d violations excused: they name a member the lie touched (it lied, or it diverged; honest judges it); the first: %s", count[c], first[c])})
	}
	return kept, excused
}

// untouchedDigests compares, at every applied index, the digests the
// members touched does not name reported, and returns the first
// difference.
func (o *observer) untouchedDigests(touched func(int) bool) []Verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, i := range slices.Sorted(maps.Keys(o.digBy)) {
		ref, refM := digestSeen{}, -1
		for _, m := range slices.Sorted(maps.Keys(o.digBy[i])) {
			if touched(m) {
				continue
			}
			d := o.digBy[i][m]
			if refM < 0 {
				ref, refM = d, m
				continue
			}
			if d.sum != ref.sum {
				return []Verdict{{Checker: "digest", At: max(d.at, ref.at), Index: i, Members: []int{refM, m},
					Detail: fmt.Sprintf("m%d digest %.8s, m%d digest %.8s at applied index %d (members the lie did not touch)", refM, ref.sum, m, d.sum, i)}}
			}
		}
	}
	return nil
}
