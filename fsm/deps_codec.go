package fsm

import (
	"encoding/binary"
	"slices"
)

// Encodings of dependencies and batches: a submit's parents and batch
// (command format version 4), a record's dependencies (job record flag
// 32), and what a command moved through them (result version 5).

// hasDeps reports whether c needs the version 4 layout.
func (c *SubmitCmd) hasDeps() bool {
	return c.Batch != nil || slices.ContainsFunc(c.Jobs, func(nj NewJob) bool { return len(nj.After) > 0 || nj.OnParentFailure != 0 })
}

// batchSumTag is the domain of submit request sums: never change it
// (sums are replicated state).
const batchSumTag = "jobraft/fsm submit sum v1\x00"

// Sum is the submit's request sum: a digest of its encoding, never 0. A
// batch keeps the sum of the submit that created it (BatchInfo.Sum).
func (c SubmitCmd) Sum() uint64 {
	return sumOf(appendCommand([]byte(batchSumTag), &c))
}

// appendNewJob appends one job of a submit (the version 1 layout).
func appendNewJob(b []byte, nj *NewJob) []byte {
	b = appendStr(b, nj.ID)
	b = appendStr(b, nj.Queue)
	b = appendStr(b, nj.Kind)
	b = appendBytes(b, nj.Payload)
	b = binary.AppendVarint(b, int64(nj.Priority))
	b = binary.AppendVarint(b, toNanos(nj.RunAt))
	b = binary.AppendUvarint(b, uint64(nj.MaxAttempts))
	b = binary.AppendVarint(b, int64(nj.Backoff.Base))
	b = binary.AppendVarint(b, int64(nj.Backoff.Max))
	b = binary.AppendUvarint(b, uint64(nj.Backoff.Factor))
	b = append(b, nj.Backoff.Jitter)
	return appendStr(b, nj.IdempotencyKey)
}

// decodeNewJob reads what appendNewJob wrote into nj.
func decodeNewJob(d *decoder, nj *NewJob) {
	nj.ID = d.str()
	nj.Queue = d.str()
	nj.Kind = d.str()
	nj.Payload = d.bytes()
	nj.Priority = d.i32()
	nj.RunAt = fromNanos(d.varint())
	nj.MaxAttempts = d.u32()
	nj.Backoff.Base = durationOf(d.varint())
	nj.Backoff.Max = durationOf(d.varint())
	nj.Backoff.Factor = d.u32()
	nj.Backoff.Jitter = d.byte()
	nj.IdempotencyKey = d.str()
}

// appendSubmitDeps appends the version 4 part of a submit.
func appendSubmitDeps(b []byte, c *SubmitCmd) []byte {
	for i := range c.Jobs {
		nj := &c.Jobs[i]
		b = binary.AppendUvarint(b, uint64(len(nj.After)))
		for _, p := range nj.After {
			b = appendStr(b, p)
		}
		b = append(b, byte(nj.OnParentFailure))
	}
	if c.Batch == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendStr(b, c.Batch.ID)
	if c.Batch.Completion == nil {
		return append(b, 0)
	}
	return appendNewJob(append(b, 1), c.Batch.Completion)
}

func decodeSubmitDeps(d *decoder, c *SubmitCmd) {
	for i := range c.Jobs {
		nj := &c.Jobs[i]
		// Bounded by the input only: a job naming too many is rejected
		// alone (ErrTooLarge), not the submit.
		if n := d.count(len(d.b), 1); n > 0 {
			nj.After = make([]string, n)
			for k := range nj.After {
				nj.After[k] = d.str()
			}
		} else {
			nj.After = nil
		}
		nj.OnParentFailure = ParentPolicy(d.byte())
	}
	if !d.bool() {
		return
	}
	c.Batch = &BatchSpec{ID: d.str()}
	if d.bool() {
		c.Batch.Completion = new(NewJob)
		decodeNewJob(d, c.Batch.Completion)
	}
}

// depsWireSize is what the version 4 layout adds for nj (with the batch
// flag byte), 0 when nj names no parent.
func depsWireSize(nj *NewJob) int {
	if len(nj.After) == 0 && nj.OnParentFailure == 0 {
		return 0
	}
	n := uvarintLen(uint64(len(nj.After))) + 2
	for _, p := range nj.After {
		n += uvarintLen(uint64(len(p))) + len(p)
	}
	return n
}

// Job record flag 32 (snapshot version 6, result version 5): the job's
// dependencies and batch, after every other field:
//
//	parent count (uvarint) | parents (str) | unmet count (uvarint) |
//	unmet parents' positions among the parents (uvarint, increasing) |
//	policy (byte) | batch (str)
const flagDeps = 32

func appendDeps(b []byte, d *jobDeps) []byte {
	b = binary.AppendUvarint(b, uint64(len(d.after)))
	for _, p := range d.after {
		b = appendStr(b, p)
	}
	b = binary.AppendUvarint(b, uint64(len(d.open)))
	k := 0
	for _, p := range d.open {
		for d.after[k] != p {
			k++
		}
		b = binary.AppendUvarint(b, uint64(k))
	}
	b = append(b, byte(d.policy))
	return appendStr(b, d.batch)
}

func depsSize(d *jobDeps) int {
	n := uvarintLen(uint64(len(d.after))) + uvarintLen(uint64(len(d.open))) + 1 + uvarintLen(uint64(len(d.batch))) + len(d.batch)
	for _, p := range d.after {
		n += uvarintLen(uint64(len(p))) + len(p)
	}
	k := 0
	for _, p := range d.open {
		for d.after[k] != p {
			k++
		}
		n += uvarintLen(uint64(k))
	}
	return n
}

func decodeDeps(d *decoder) *jobDeps {
	x := &jobDeps{}
	if n := d.count(MaxParents, 1); n > 0 {
		x.after = make([]string, n)
		for i := range x.after {
			x.after[i] = d.str()
		}
	}
	n := d.count(len(x.after), 1)
	last := -1
	for i := 0; i < n && d.err == nil; i++ {
		k := int(d.uvarint())
		if k <= last || k >= len(x.after) {
			d.fail("unmet parent position %d", k)
			break
		}
		last = k
		x.open = append(x.open, x.after[k])
	}
	x.policy = ParentPolicy(d.byte())
	x.batch = d.str()
	if d.err == nil && (x.policy >= numPolicies || (len(x.after) == 0 && (x.batch == "" || x.policy != 0))) {
		d.fail("dependencies without parents or batch, or policy %d", x.policy)
	}
	return x
}

// checkDeps verifies a restored record's dependencies: a reason or "".
func checkDeps(j *job) string {
	d := j.dep()
	if d == nil {
		if j.state == StateWaiting {
			return "waiting without parents"
		}
		return ""
	}
	nj := NewJob{ID: j.id, After: d.after, OnParentFailure: d.policy}
	switch {
	case nj.validateDeps() != nil:
		return "bad parents"
	case d.batch != "" && checkName("batch", d.batch) != nil:
		return "bad batch"
	case (j.state == StateWaiting) != d.waits() && (j.state == StateWaiting || !j.state.Terminal()):
		// Only a waiting job has unmet parents, but one that ended
		// (canceled, dead, or succeeded after a retry's recheck: never)
		// may keep them for a retry to look at again.
		return "waiting iff unmet parents violated"
	}
	return ""
}

// setPublic sets p's dependency fields from d.
func (d *jobDeps) setPublic(p *Job) {
	if d == nil {
		return
	}
	p.After, p.Unmet, p.OnParentFailure, p.Batch = d.after, d.open, d.policy, d.batch
}

// Result version 5 is version 4 with, after the body of a successful
// command, what it moved through dependencies and batches (written only
// when it moved something; otherwise the result is version 4):
//
//	cascade count (uvarint) | per job: kind (byte) | job record without payload |
//	completed count (uvarint) | per batch: its record without template
const resultVersionDeps = 5

func (r *result) hasDeps() bool { return len(r.cascade) > 0 || len(r.completed) > 0 }

func appendResultDeps(b []byte, r *result) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.cascade)))
	for _, c := range r.cascade {
		b = append(b, byte(c.kind))
		b = appendJob(b, c.job, false)
	}
	b = binary.AppendUvarint(b, uint64(len(r.completed)))
	for _, g := range r.completed {
		b = appendGroup(b, g, false)
	}
	return b
}

func resultDepsSize(r *result) int {
	if !r.hasDeps() {
		return 0
	}
	n := uvarintLen(uint64(len(r.cascade))) + uvarintLen(uint64(len(r.completed)))
	for _, c := range r.cascade {
		n += 1 + jobSize(c.job, false)
	}
	for _, g := range r.completed {
		n += len(appendGroup(nil, g, false)) // rare: a batch completing
	}
	return n
}

func decodeResultDeps(d *decoder, r *Result) {
	n := d.count(len(d.b), 20)
	for i := 0; i < n && d.err == nil; i++ {
		k := CascadeKind(d.byte())
		if k == CascadeInvalid || k >= numCascades {
			d.fail("cascade kind %d", k)
			break
		}
		r.Cascade = append(r.Cascade, Cascaded{Kind: k, Job: decodePublic(d, false)})
	}
	n = d.count(len(d.b), 20)
	for i := 0; i < n && d.err == nil; i++ {
		r.Completed = append(r.Completed, decodeGroup(d).public())
	}
}
