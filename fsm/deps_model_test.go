package fsm

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The reference model's dependencies and batches: brute force over the
// model's maps, written to be obviously right (no index of dependents, no
// incremental counts: a batch's counts move by comparing every job's state
// before and after a command).

// modelGroup is a batch in the model.
type modelGroup struct {
	info   BatchInfo
	lo, hi uint64
	tmpl   *NewJob
}

// states is every job's state (by ID and sequence), before a command.
func (m *model) states() map[string]Job {
	out := make(map[string]Job, len(m.jobs))
	for id, j := range m.jobs {
		out[id] = Job{State: j.State, Seq: j.Seq}
	}
	return out
}

// order is the order a submit creates its jobs in: repeatedly the
// smallest position not yet taken whose parents among the submit's (valid,
// first of their ID) jobs are all taken; those never taken are cyclic.
func modelOrder(jobs []NewJob) (order []int, cyclic []bool) {
	first := map[string]int{}
	for i := range jobs {
		if _, seen := first[jobs[i].ID]; jobs[i].ID != "" && !seen && jobs[i].validate() == nil {
			first[jobs[i].ID] = i
		}
	}
	taken := make([]bool, len(jobs))
	for {
		next := -1
		for i := range jobs {
			if taken[i] {
				continue
			}
			ok := true
			for _, p := range jobs[i].After {
				if k, in := first[p]; in && k != i && !taken[k] && jobs[i].validate() == nil {
					ok = false
				}
			}
			if ok {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		taken[next] = true
		order = append(order, next)
	}
	cyclic = make([]bool, len(jobs))
	for i := range jobs {
		cyclic[i] = !taken[i]
	}
	return order, cyclic
}

func (m *model) submit(e Entry, c *SubmitCmd, r *Result, now time.Time) {
	if c.Batch != nil && m.groups[c.Batch.ID] != nil {
		r.Code = CodeBatchExists
		return
	}
	subs := make([]Submitted, len(c.Jobs))
	order, cyclic := modelOrder(c.Jobs)
	lo := m.seq + 1
	var members []*Job
	for _, i := range order {
		nj := c.Jobs[i]
		if rf := nj.validate(); rf != nil {
			subs[i] = Submitted{Outcome: OutcomeRejected, Code: rf.code}
			continue
		}
		if id, ok := m.keys[nj.IdempotencyKey]; ok && nj.IdempotencyKey != "" {
			subs[i] = Submitted{Outcome: OutcomeDuplicate, Job: noPayload(m.jobs[id])}
			continue
		}
		id := nj.ID
		if id == "" {
			id = derivedID(e.Index, i)
		}
		if old, ok := m.jobs[id]; ok {
			subs[i] = Submitted{Outcome: OutcomeDuplicate, Job: noPayload(old)}
			continue
		}
		holder, uq := m.uniqueHolder(nj, toNanos(now)) // limit_model_test.go
		if holder != nil {
			subs[i] = Submitted{Outcome: OutcomeDuplicate, Job: noPayload(holder)}
			continue
		}
		var unmet []string
		code := CodeOK
		for _, p := range nj.After {
			pj, ok := m.jobs[p]
			switch {
			case !ok:
				code = CodeUnknownParent
			case pj.State == StateDead || pj.State == StateCanceled:
				code = CodeParentFailed
			case pj.State != StateSucceeded:
				unmet = append(unmet, p)
			}
			if code != CodeOK {
				break
			}
		}
		if code != CodeOK {
			subs[i] = Submitted{Outcome: OutcomeRejected, Code: code}
			continue
		}
		j := m.create(&nj, id, now)
		j.Unique = uq
		if len(nj.After) > 0 {
			j.After, j.OnParentFailure = slices.Clone(nj.After), nj.OnParentFailure
		}
		if c.Batch != nil {
			j.Batch = c.Batch.ID
			members = append(members, j)
		}
		if len(unmet) > 0 {
			j.Unmet, j.State, j.RunAt = unmet, StateWaiting, nj.RunAt
		}
		subs[i] = Submitted{Outcome: OutcomeCreated, Job: noPayload(j)}
	}
	for i, cyc := range cyclic {
		if cyc {
			subs[i] = Submitted{Outcome: OutcomeRejected, Code: CodeDependencyCycle}
		}
	}
	r.Submitted = subs
	if c.Batch == nil {
		return
	}
	g := &modelGroup{lo: lo, hi: m.seq, tmpl: c.Batch.Completion,
		info: BatchInfo{ID: c.Batch.ID, Index: e.Index, Created: now, Members: len(members), Sum: c.Sum()}}
	for _, j := range members {
		g.count(j.State, 1)
	}
	if g.tmpl != nil {
		if g.info.CompletionJob = g.tmpl.ID; g.info.CompletionJob == "" {
			g.info.CompletionJob = derivedID(e.Index, len(c.Jobs))
		}
	}
	m.groups[g.info.ID] = g
}

// create adds a job submitted as nj with ID id at now (pending or
// scheduled).
func (m *model) create(nj *NewJob, id string, now time.Time) *Job {
	m.seq++
	j := &Job{ID: id, Queue: nj.Queue, Kind: nj.Kind, Payload: nj.Payload, Priority: nj.Priority,
		RunAt: nj.RunAt, MaxAttempts: nj.MaxAttempts, Backoff: nj.Backoff.withDefaults(),
		IdempotencyKey: nj.IdempotencyKey, State: StatePending, Seq: m.seq, Created: now, Updated: now}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	modelReady(j, now)
	m.jobs[id] = j
	if j.IdempotencyKey != "" {
		m.keys[j.IdempotencyKey] = id
	}
	return j
}

func modelReady(j *Job, now time.Time) {
	if j.RunAt.IsZero() || !j.RunAt.After(now) {
		j.RunAt, j.State = now, StatePending
		return
	}
	j.State = StateScheduled
}

func (g *modelGroup) count(s State, d int) {
	c := &g.info.Counts
	switch s {
	case StatePending:
		c.Pending += d
	case StateScheduled:
		c.Scheduled += d
	case StateRunning:
		c.Running += d
	case StateSucceeded:
		c.Succeeded += d
	case StateDead:
		c.Dead += d
	case StateCanceled:
		c.Canceled += d
	case StateWaiting:
		c.Waiting += d
	}
}

// member returns the batch j counts in, nil if none.
func (m *model) member(j *Job) *modelGroup {
	if g := m.groups[j.Batch]; g != nil && j.Batch != "" && j.Seq >= g.lo && j.Seq <= g.hi {
		return g
	}
	return nil
}

// recheck is a retry's check of a dead or canceled job's unmet parents:
// those still unmet, or why the retry is refused.
func (m *model) recheck(j *Job) ([]string, Code) {
	var unmet []string
	for _, p := range j.Unmet {
		pj, ok := m.jobs[p]
		switch {
		case !ok:
			return nil, CodeUnknownParent
		case pj.State == StateDead || pj.State == StateCanceled:
			return nil, CodeParentFailed
		case pj.State != StateSucceeded:
			unmet = append(unmet, p)
		}
	}
	return unmet, CodeOK
}

// wait sets a retried job's unmet parents: with some, it waits.
func (m *model) wait(j *Job, unmet []string) {
	if len(j.After) == 0 {
		return
	}
	j.Unmet = unmet
	if len(unmet) > 0 {
		j.State = StateWaiting
	}
}

// settle is what a command moved through dependencies and batches:
// batch counts follow every job's state change; the dependents of the
// jobs it ended (in r.Expired order for an expire) are released or failed
// breadth first; then every batch whose members all ended completes, in
// ID order, creating its completion job.
func (m *model) settle(before map[string]Job, r *Result, nowNs int64) {
	now := fromNanos(nowNs)
	var work []string
	ended := func(id string) {
		if b, ok := before[id]; ok && b.Seq == m.jobs[id].Seq && !b.State.Terminal() && m.jobs[id].State.Terminal() {
			work = append(work, id)
		}
	}
	if len(r.Expired) > 0 {
		for _, id := range r.Expired {
			ended(id)
		}
	} else {
		for _, j := range r.Jobs {
			ended(j.ID)
		}
	}
	for id, j := range m.jobs {
		if b, ok := before[id]; ok && b.Seq == j.Seq && b.State != j.State {
			if g := m.member(j); g != nil {
				g.count(b.State, -1)
				g.count(j.State, 1)
			}
		}
	}
	for i := 0; i < len(work); i++ {
		p := m.jobs[work[i]]
		var kids []string
		for id, j := range m.jobs {
			if j.State == StateWaiting && slices.Contains(j.Unmet, p.ID) {
				kids = append(kids, id)
			}
		}
		sort.Strings(kids)
		for _, id := range kids {
			j := m.jobs[id]
			from := j.State
			j.Updated = now
			if p.State == StateSucceeded {
				j.Unmet = slices.DeleteFunc(slices.Clone(j.Unmet), func(x string) bool { return x == p.ID })
				if len(j.Unmet) > 0 {
					continue
				}
				j.Unmet = nil
				modelReady(j, now)
				r.Cascade = append(r.Cascade, Cascaded{Kind: CascadeReleased, Job: noPayload(j)})
			} else {
				j.State = StateCanceled
				if j.OnParentFailure == ParentFailDead {
					j.State = StateDead
				}
				j.Finished, j.Result = now, nil
				j.LastError = fmt.Sprintf("parent %q ended %s", p.ID, p.State)
				work = append(work, id)
				r.Cascade = append(r.Cascade, Cascaded{Kind: CascadeFailed, Job: noPayload(j)})
			}
			if g := m.member(j); g != nil {
				g.count(from, -1)
				g.count(j.State, 1)
			}
		}
	}
	var ids []string
	for id, g := range m.groups {
		c := g.info.Counts
		if !g.info.Done && c.Succeeded+c.Dead+c.Canceled == g.info.Members {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		g := m.groups[id]
		g.info.Done, g.info.Completed = true, now
		r.Completed = append(r.Completed, g.info)
		t := g.tmpl
		if t == nil || m.jobs[g.info.CompletionJob] != nil || (t.IdempotencyKey != "" && m.keys[t.IdempotencyKey] != "") {
			continue
		}
		j := m.create(t, g.info.CompletionJob, now)
		r.Cascade = append(r.Cascade, Cascaded{Kind: CascadeCompletion, Job: noPayload(j)})
	}
}

// sweepGroups is a sweep's removal of batches completed MaxAge ago.
func (m *model) sweepGroups(c *SweepCmd, nowNs int64) {
	for id, g := range m.groups {
		if c.MaxAge > 0 && g.info.Done && nowNs-toNanos(g.info.Completed) >= int64(c.MaxAge) {
			delete(m.groups, id)
		}
	}
}

// checkBatches compares the real machine's batches with the model's.
func (w *world) checkBatches(t interface{ Fatalf(string, ...any) }) {
	var ids []string
	for id := range w.ref.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var want []BatchInfo
	for _, id := range ids {
		want = append(want, w.ref.groups[id].info)
		if got, ok := w.real.Batch(id); !ok || got != w.ref.groups[id].info {
			t.Fatalf("Batch(%q) = %+v %v, model %+v", id, got, ok, w.ref.groups[id].info)
		}
	}
	if got := w.real.Batches("", 0); !slices.Equal(got, want) {
		t.Fatalf("Batches() = %+v, model %+v", got, want)
	}
	for id := range w.ref.jobs {
		var kids []string
		for kid, j := range w.ref.jobs {
			if slices.Contains(j.After, id) {
				kids = append(kids, kid)
			}
		}
		sort.Strings(kids)
		if got := w.real.Dependents(id); !slices.Equal(got, kids) {
			t.Fatalf("Dependents(%q) = %q, model %q", id, got, kids)
		}
	}
}

// genParents draws a submitted job's parents: mostly none, else a few of
// the IDs the world uses (some held, some of the same submit, some
// unknown, itself or a duplicate now and then) and a policy (an invalid
// one now and then).
func (w *world) genParents(t *rapid.T, nj *NewJob) {
	if rapid.IntRange(0, 2).Draw(t, "hasparents") > 0 {
		return
	}
	nj.After = rapid.SliceOfN(rapid.SampledFrom([]string{"j0", "j1", "j2", "j3", "j4", "j5", "nope"}), 0, 3).Draw(t, "after")
	nj.OnParentFailure = ParentPolicy(rapid.SampledFrom([]uint8{0, 0, 1, 1, 2}).Draw(t, "policy"))
}

// genBatch draws a submit's batch: mostly none, else one of a few IDs
// (so some exist), with a completion job now and then.
func (w *world) genBatch(t *rapid.T) *BatchSpec {
	if rapid.IntRange(0, 3).Draw(t, "hasbatch") > 0 {
		return nil
	}
	b := &BatchSpec{ID: rapid.SampledFrom([]string{"b1", "b2", "b3", ""}).Draw(t, "batchid")}
	if rapid.Bool().Draw(t, "completion") {
		b.Completion = &NewJob{ID: rapid.SampledFrom([]string{"", "", "done", "j0"}).Draw(t, "cid"), Queue: "c", Kind: "k",
			IdempotencyKey: rapid.SampledFrom([]string{"", "", "k1"}).Draw(t, "ckey")}
	}
	return b
}

// gen draws the next command: genCommand's, or with w.deps, half the
// time one that moves dependencies along: a submit of jobs with parents
// among the held jobs, an ack (or term) of a running job's lease, or a
// claim of every queue.
func (w *world) gen(t *rapid.T) Command {
	if !w.deps || rapid.Bool().Draw(t, "plain") {
		return w.genCommand(t)
	}
	var running []*Job
	for _, id := range sortedIDs(w.ref.jobs) {
		if j := w.ref.jobs[id]; j.State == StateRunning {
			running = append(running, j)
		}
	}
	switch k := rapid.IntRange(0, 5).Draw(t, "depcmd"); {
	case k < 2 && len(running) > 0:
		j := rapid.SampledFrom(running).Draw(t, "runningjob")
		if k == 0 || rapid.IntRange(0, 3).Draw(t, "term") > 0 {
			return &AckCmd{ID: j.ID, Token: j.Lease.Token}
		}
		return &TermCmd{ID: j.ID, Token: j.Lease.Token, Reason: "x"}
	case k < 4:
		return &ClaimCmd{Queues: []string{"a", "b", "c"}, Worker: "w", Max: 2, TTL: time.Minute}
	}
	held := sortedIDs(w.ref.jobs)
	n := rapid.IntRange(1, 3).Draw(t, "ndeps")
	jobs := make([]NewJob, n)
	for i := range jobs {
		jobs[i] = NewJob{ID: w.genID(t, false), Queue: queuesGen.Draw(t, "queue"), Kind: "k"}
		if len(held) > 0 || i > 0 {
			pool := append(append([]string(nil), held...), "j0", "j1", "j2", "j3", "j4", "j5")
			jobs[i].After = slices.Compact(slices.Sorted(slices.Values(rapid.SliceOfN(rapid.SampledFrom(pool), 1, 3).Draw(t, "parents"))))
			jobs[i].OnParentFailure = ParentPolicy(rapid.IntRange(0, 1).Draw(t, "policy"))
		}
	}
	return &SubmitCmd{Jobs: jobs, Batch: w.genBatch(t)}
}

func sortedIDs(jobs map[string]*Job) []string {
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// TestDifferentialDeps is TestDifferential drawing dependencies, batches
// and their parents' ends often: releases, cascades of failures and
// batch completions are compared with the model.
func TestDifferentialDeps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		w.deps = true
		steps := rapid.IntRange(1, 80).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			w.step(t)
			if rapid.IntRange(0, 4).Draw(t, "check") == 0 || i == steps-1 {
				w.checkQueries(t)
			}
			if rapid.IntRange(0, 20).Draw(t, "snap") == 0 {
				w.snapshotRestore(t)
			}
		}
	})
}
