package fsm

import (
	"slices"

	"github.com/jobraft/jobraft/internal/test/bugs"
)

// Limits at claim time. A claim's sources (apply.go) are its queues'
// ready trees; for a queue with limits each source also carries the
// queue's limits and, when the source is one kind's tree, that kind's
// limit. A source is blocked while its queue runs its limit's worth of
// jobs, its kind runs its own, or the queue's bucket is empty; the claim
// takes the best job of the sources not blocked, so it leases at most what
// the limits leave and passes over the rest without changing them. Counts
// only rise and tokens only fall during one claim, so a source once
// blocked stays blocked until the claim ends.
//
// A queue with kind limits is read kind by kind (its kinds' trees), also
// by a claim that names no kinds, so a kind at its limit is passed over
// while the queue's other kinds are leased.

// limitSource is what sources keep per tree for limits: nil lim for a
// queue without limits.
type limitSource struct {
	q    *queue
	lim  *qlimit
	kind int // index of the source's kind in lim.kinds, -1: none
}

// blocked reports why source i may lease nothing more at now: 0 not
// blocked, heldByLimit (a concurrency limit), heldByRate (the bucket).
func (src *sources) blocked(i int, now int64) uint8 {
	ls := &src.lims[i]
	l := ls.lim
	switch {
	case l == nil || bugs.On("limit"):
		return 0
	case l.max > 0 && ls.q.counts[StateRunning] >= int(l.max):
		return heldByLimit
	case ls.kind >= 0 && l.kinds[ls.kind].running >= int(l.kinds[ls.kind].max):
		return heldByLimit
	case l.every > 0 && l.tokens(now) == 0:
		return heldByRate
	}
	return 0
}

const (
	heldByLimit = 1
	heldByRate  = 2
)

// addQueue adds q's ready trees to src: the queue's tree, or one per kind
// (the claim's kinds, or every kind of the queue when it has kind limits).
func (s *state) addQueue(src *sources, q *queue, kinds []string) {
	l := s.limitOf(q.name)
	if len(kinds) == 0 && l != nil && len(l.kinds) > 0 {
		kinds = make([]string, 0, len(q.byKind))
		for k := range q.byKind {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds) // sources' order does not reach a result; sorted all the same
	}
	if len(kinds) == 0 {
		src.add(q.ready, q, l, "")
		return
	}
	for i, k := range kinds {
		if !slices.Contains(kinds[:i], k) {
			src.add(q.kindTree(k, StatePending), q, l, k)
		}
	}
}

// add adds tree t (nil: none) of queue q, whose limits are l (nil: none),
// holding kind's jobs ("": every kind's).
func (src *sources) add(t *tree, q *queue, l *qlimit, kind string) {
	if t == nil {
		return
	}
	ls := limitSource{q: q, lim: l, kind: -1}
	if l != nil && kind != "" {
		if i, ok := l.kind(kind); ok {
			ls.kind = i
		}
	}
	it, ok := t.Min()
	src.trees, src.heads, src.ok = append(src.trees, t), append(src.heads, it), append(src.ok, ok)
	src.lims = append(src.lims, ls)
}

// took accounts for a job leased from source i at now: one token of its
// queue's bucket (running counts follow the job's state, state.go).
func (src *sources) took(i int, now int64) {
	if l := src.lims[i].lim; l != nil && l.every > 0 {
		l.take(now)
	}
}

// countHeld counts the claim as held back by each queue whose limits kept
// a ready job of it from a claim that had room for more: once per queue
// in limited when a concurrency limit (the queue's or a kind's) held one,
// once in rateLimited when the bucket held one that no concurrency limit
// did.
func (src *sources) countHeld(now int64) {
	var conc, rate []*qlimit
	for i := range src.trees {
		if !src.ok[i] {
			continue
		}
		switch src.blocked(i, now) {
		case heldByLimit:
			conc = appendOnce(conc, src.lims[i].lim)
		case heldByRate:
			rate = appendOnce(rate, src.lims[i].lim)
		}
	}
	for _, l := range conc {
		l.limited++
	}
	for _, l := range rate {
		l.rateLimited++
	}
}

func appendOnce(ls []*qlimit, l *qlimit) []*qlimit {
	if slices.Contains(ls, l) {
		return ls
	}
	return append(ls, l)
}

// blocksQueue reports whether l (nil: no limits) lets no job of its
// queue q be leased at log time t: the queue runs its limit's worth, or
// its bucket is empty.
func (l *qlimit) blocksQueue(q *queue, t int64) bool {
	return l != nil && ((l.max > 0 && q.counts[StateRunning] >= int(l.max)) || (l.every > 0 && l.tokens(t) == 0))
}

// blocksKind reports whether kind runs its limit's worth in l's queue.
func (l *qlimit) blocksKind(kind string) bool {
	if l == nil {
		return false
	}
	i, ok := l.kind(kind)
	return ok && l.kinds[i].running >= int(l.kinds[i].max)
}

// claimKinds is the kinds Claimable looks at in q for a claim of kinds:
// the claim's, or when it names none and q has kind limits, every kind
// of q (whose order does not matter: any one claimable answers).
func (l *qlimit) claimKinds(q *queue, kinds []string) []string {
	if len(kinds) > 0 || l == nil || len(l.kinds) == 0 {
		return kinds
	}
	all := make([]string, 0, len(q.byKind))
	for k := range q.byKind {
		all = append(all, k)
	}
	return all
}
