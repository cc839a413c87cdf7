package fsm

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/jobraft/jobraft/internal/test/bugs"
)

// This file is dependencies between jobs: a job submitted with parents
// (NewJob.After) waits (StateWaiting) until every parent succeeded, and
// ends by its policy (OnParentFailure) when one ends otherwise; both
// happen in the entry that ended the parent, and cascade to the job's own
// dependents in that entry. Batches (a submit's jobs as one, with a
// completion job) are in batch_group.go. The rules:
//
//   - At submit, a parent must be held (a job of the state, or a job of
//     the same submit that it creates: jobs of one submit may name each
//     other, earlier or later; they are created parents first, and a
//     cycle among them is refused ErrDependencyCycle). A parent that
//     succeeded is met at once; one dead or canceled refuses the job
//     (ErrParentFailed); an unknown one refuses it (ErrUnknownParent).
//   - A parent's success is remembered in the dependent's record (Unmet
//     loses it), so a parent removed by a sweep while a dependent waits
//     strands nothing: a waiting job's unmet parents are never terminal,
//     hence never swept.
//   - Cancel of a waiting job cancels it (and cascades). Retry of a dead
//     or canceled dependent checks its unmet parents again: succeeded
//     ones are met, a failed one refuses the retry (ErrParentFailed), one
//     no longer held refuses it (ErrUnknownParent); with some still
//     unmet, the job waits again.

// MaxParents bounds the parents of one job (NewJob.After).
const MaxParents = 64

// ParentPolicy is what a parent's failure (dead, canceled) does to a
// waiting dependent. Values are part of the encodings.
type ParentPolicy uint8

// Parent policies.
const (
	ParentFailCancel ParentPolicy = iota // the dependent is canceled (the default)
	ParentFailDead                       // the dependent is dead
	numPolicies
)

func (p ParentPolicy) String() string {
	switch p {
	case ParentFailCancel:
		return "cancel"
	case ParentFailDead:
		return "dead"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// state returns the terminal state the policy ends a dependent in.
func (p ParentPolicy) state() State {
	if p == ParentFailDead {
		return StateDead
	}
	return StateCanceled
}

// jobDeps is a job's parents, the unmet ones, its policy and its batch.
// Immutable once published: records share it until one changes it.
type jobDeps struct {
	after  []string
	open   []string // parents not known to have succeeded, in after order
	policy ParentPolicy
	batch  string
}

// waits reports whether d has an unmet parent.
func (d *jobDeps) waits() bool { return d != nil && len(d.open) > 0 }

// without returns d with parent p met.
func (d *jobDeps) without(p string) *jobDeps {
	n := *d
	n.open = slices.DeleteFunc(slices.Clone(d.open), func(x string) bool { return x == p })
	if len(n.open) == 0 {
		n.open = nil
	}
	return &n
}

func (nj *NewJob) validateDeps() *refusal {
	if len(nj.After) > MaxParents {
		return refuse(CodeTooLarge, "job names %d parents (max %d)", len(nj.After), MaxParents)
	}
	for i, p := range nj.After {
		if r := checkID(p); r != nil {
			r.detail = "parent: " + r.detail
			return r
		}
		if p == nj.ID {
			return refuse(CodeDependencyCycle, "job %q names itself as a parent", p)
		}
		if slices.Contains(nj.After[:i], p) {
			return refuse(CodeInvalidCommand, "parent %q named twice", p)
		}
	}
	if nj.OnParentFailure >= numPolicies {
		return refuse(CodeInvalidCommand, "parent failure policy %d", nj.OnParentFailure)
	}
	return nil
}

// depOrder is the order a submit creates its jobs in when some name
// others of the same submit as parents: parents first, else by position
// (Kahn's algorithm, the smallest position first). cyclic marks the jobs
// on a cycle of such parents, or depending on one: they are left out of
// order. Jobs that fail validation take no part (naming one is naming an
// unknown parent). Both are nil when no job names another of the submit.
func depOrder(jobs []NewJob) (order []int, cyclic []bool) {
	if !slices.ContainsFunc(jobs, func(nj NewJob) bool { return len(nj.After) > 0 }) {
		return nil, nil
	}
	valid := make([]bool, len(jobs))
	pos := map[string]int{} // looked up by key only
	for i := range jobs {
		valid[i] = jobs[i].validate() == nil
		if id := jobs[i].ID; id != "" && valid[i] {
			if _, ok := pos[id]; !ok {
				pos[id] = i
			}
		}
	}
	indeg := make([]int, len(jobs))
	kids := make([][]int, len(jobs))
	edges := false
	for i := range jobs {
		if !valid[i] {
			continue
		}
		for _, p := range jobs[i].After {
			if k, ok := pos[p]; ok && k != i {
				indeg[i]++
				kids[k] = append(kids[k], i)
				edges = true
			}
		}
	}
	if !edges {
		return nil, nil
	}
	h := &posHeap{}
	for i := range jobs {
		if indeg[i] == 0 {
			h.ps = append(h.ps, i) // ascending: already a heap
		}
	}
	order = make([]int, 0, len(jobs))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, i)
		for _, k := range kids[i] {
			if indeg[k]--; indeg[k] == 0 {
				heap.Push(h, k)
			}
		}
	}
	cyclic = make([]bool, len(jobs))
	for i := range jobs {
		cyclic[i] = indeg[i] > 0
	}
	return order, cyclic
}

// posHeap is a min-heap of submit positions.
type posHeap struct{ ps []int }

func (h *posHeap) Len() int           { return len(h.ps) }
func (h *posHeap) Less(i, j int) bool { return h.ps[i] < h.ps[j] }
func (h *posHeap) Swap(i, j int)      { h.ps[i], h.ps[j] = h.ps[j], h.ps[i] }
func (h *posHeap) Push(x any)         { h.ps = append(h.ps, x.(int)) }
func (h *posHeap) Pop() any {
	x := h.ps[len(h.ps)-1]
	h.ps = h.ps[:len(h.ps)-1]
	return x
}

// parentsOf checks nj's parents against the state and returns its
// dependencies (with batch, the submit's batch ID; nil when it has
// neither parents nor batch).
func (s *state) parentsOf(nj *NewJob, batch string) (*jobDeps, *refusal) {
	if len(nj.After) == 0 && batch == "" {
		return nil, nil
	}
	d := &jobDeps{batch: batch}
	if len(nj.After) > 0 { // a policy without parents has nothing to say
		d.after, d.policy = slices.Clone(nj.After), nj.OnParentFailure
	}
	for _, p := range d.after {
		switch pj := s.get(p); {
		case pj == nil:
			return nil, refuse(CodeUnknownParent, "parent %q is not a job", p)
		case pj.state == StateDead || pj.state == StateCanceled:
			return nil, refuse(CodeParentFailed, "parent %q is %s", p, pj.state)
		case pj.state != StateSucceeded:
			d.open = append(d.open, p)
		}
	}
	return d, nil
}

// recheck is retry's look at a dead or canceled dependent's unmet parents
// (n is the retried copy, pending): met ones are dropped; with some still
// unmet, n waits.
func (s *state) recheck(n *job) *refusal {
	if !n.dep().waits() {
		return nil
	}
	d := *n.dep()
	d.open = nil
	for _, p := range n.dep().open {
		switch pj := s.get(p); {
		case pj == nil:
			return refuse(CodeUnknownParent, "parent %q of job %q is no longer held", p, n.id)
		case pj.state == StateDead || pj.state == StateCanceled:
			return refuse(CodeParentFailed, "parent %q of job %q is %s", p, n.id, pj.state)
		case pj.state != StateSucceeded:
			d.open = append(d.open, p)
		}
	}
	n.setDeps(&d)
	if d.waits() {
		n.state = StateWaiting
	}
	return nil
}

// ready makes a job that waits for nothing pending (its run-at now if
// due) or scheduled.
func (j *job) ready(now int64) {
	if j.runAt <= now {
		j.runAt = now
		j.state = StatePending
		return
	}
	j.state = StateScheduled
}

// depWork is a parent that ended in this entry, for settle: ok when it
// succeeded.
type depWork struct {
	id string
	ok bool
}

// depState is the state's dependency and batch part: the index of
// dependents, the batches, and the work an entry leaves for settle.
type depState struct {
	// kids maps a parent's ID to the held jobs naming it (in any
	// order: sorted before use). Derived from the records (rebuilt on
	// restore); looked up by key only.
	kids   map[string][]string
	groups *groupTree // batches by ID (batch_group.go), nil until the first
	gacc   [4]uint64  // sum of the batch records' hashes
	work   []depWork  // parents ended in this entry
	due    []string   // batches that may have completed in this entry
}

// indexKids adds (or removes) j under each of its parents.
func (s *state) indexKids(j *job, add bool) {
	d := j.dep()
	if d == nil {
		return
	}
	for _, p := range d.after {
		ids := s.dep.kids[p]
		if add {
			if s.dep.kids == nil {
				s.dep.kids = map[string][]string{}
			}
			s.dep.kids[p] = append(ids, j.id)
			continue
		}
		if i := slices.Index(ids, j.id); i >= 0 {
			ids = slices.Delete(ids, i, i+1)
		}
		if len(ids) == 0 {
			delete(s.dep.kids, p)
		} else {
			s.dep.kids[p] = ids
		}
	}
}

// noteDeps is replace's hook: old became n. A batch member's move is
// counted in its batch; a parent that ended is left for settle.
func (s *state) noteDeps(old, n *job) {
	if old.state == n.state {
		return
	}
	if n.dep() != nil && n.dep().batch != "" {
		s.groupMove(n, old.state)
	}
	if n.state.Terminal() && !old.state.Terminal() && len(s.dep.kids[n.id]) > 0 {
		s.dep.work = append(s.dep.work, depWork{id: n.id, ok: n.state == StateSucceeded})
	}
}

// settle finishes an entry's command: the dependents of parents that
// ended are released or failed, breadth first (a dependent failed in
// turn fails its own), each parent's dependents in ID order; then the
// batches that completed complete, in ID order (batch_group.go).
func (s *state) settle(now int64, r *result) {
	for i := 0; i < len(s.dep.work); i++ {
		w := s.dep.work[i]
		for _, id := range slices.Sorted(slices.Values(s.dep.kids[w.id])) {
			old := s.get(id)
			if old == nil || old.state != StateWaiting || !slices.Contains(old.dep().open, w.id) {
				continue
			}
			n := old.clone()
			n.updated = now
			kind := CascadeReleased
			if w.ok {
				n.setDeps(old.dep().without(w.id))
				if !n.dep().waits() || bugs.On("early") {
					n.ready(now)
				}
			} else {
				kind = CascadeFailed
				n.state = old.dep().policy.state()
				n.setOutcome(fmt.Sprintf("parent %q ended %s", w.id, s.get(w.id).state), nil)
			}
			s.replace(old, n) // a failed one may add its own dependents to work
			if n.state != StateWaiting {
				r.cascade = append(r.cascade, cascaded{kind: kind, job: n})
			}
		}
	}
	s.dep.work = s.dep.work[:0]
	if len(s.dep.due) > 0 {
		s.completeDue(now, r)
	}
}

// Dependents returns the IDs of the held jobs naming id as a parent, in ID
// order.
func (m *Jobs) Dependents(id string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.st.dep.kids[id]) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(m.st.dep.kids[id]))
}

// CascadeKind says how a command moved a job other than the ones it names
// (Result.Cascade).
type CascadeKind uint8

// Cascade kinds. Values are part of the result encoding.
const (
	CascadeInvalid    CascadeKind = iota
	CascadeReleased               // its last parent succeeded: pending or scheduled
	CascadeFailed                 // a parent failed: canceled or dead by its policy
	CascadeCompletion             // a batch's completion job was created
	numCascades
)

func (k CascadeKind) String() string {
	switch k {
	case CascadeReleased:
		return "released"
	case CascadeFailed:
		return "parent-failed"
	case CascadeCompletion:
		return "completion"
	}
	return "invalid"
}

// Cascaded is a job a command moved through its dependencies or batch,
// without payload.
type Cascaded struct {
	Kind CascadeKind
	Job  Job
}

type cascaded struct {
	kind CascadeKind
	job  *job
}

// checkWaiting verifies, after a restore, that every waiting job's unmet
// parents are held and neither terminal (the invariant sweeps rely on):
// it returns a reason or "".
func (s *state) checkWaiting() string {
	why := ""
	s.jobs.Scan(func(e idEnt) bool {
		j := e.sl.j
		if j.state != StateWaiting {
			return true
		}
		for _, p := range j.dep().open {
			if pj := s.get(p); pj == nil || pj.state.Terminal() {
				why = fmt.Sprintf("waiting job %q: unmet parent %q not held or ended", j.id, p)
				return false
			}
		}
		return true
	})
	return why
}
