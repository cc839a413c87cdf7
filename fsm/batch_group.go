package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/bugs"
	"github.com/tidwall/btree"
)

// This file is batches: a submit with a BatchSpec makes the jobs it
// creates one batch (not those it answers duplicate or rejects). The
// batch counts its members by state as they move (a member swept keeps
// its last state in the counts); it completes in the entry where its last
// member ends (every member succeeded, dead or canceled; a batch with no
// member completes in the entry that created it) and then, once, creates
// its completion job from the template given at creation, unless a job
// with that ID or idempotency key is held then (never twice). A member
// retried after completion moves the counts, not the completion. A
// completed batch is removed by a sweep with a MaxAge at least that long
// after its completion.
//
// A batch is named by its creating submit alone: a submit naming a batch
// that exists is refused whole (ErrBatchExists). Its members are the jobs
// of batch ID whose submit sequence is in the batch's range, so a job of
// an older batch of the same ID (swept) never counts in a new one.

// BatchSpec makes the jobs a submit creates one batch.
type BatchSpec struct {
	// ID names the batch (1..MaxNameLen bytes), unique among held
	// batches.
	ID string
	// Completion, if set, is the job created when the batch completes
	// (its parents, After, must be empty). Without an ID it gets one
	// derived from the creating entry (as a submitted job without an ID,
	// at the position after the submit's last job).
	Completion *NewJob
}

func (b *BatchSpec) validate() *refusal {
	if b == nil {
		return nil
	}
	if r := checkName("batch id", b.ID); r != nil {
		return r
	}
	t := b.Completion
	if t == nil {
		return nil
	}
	if r := t.validate(); r != nil {
		r.detail = "completion job: " + r.detail
		return r
	}
	if len(t.After) > 0 || t.OnParentFailure != 0 {
		return refuse(CodeInvalidCommand, "completion job with parents or a parent policy")
	}
	return nil
}

// BatchInfo is a batch as queries and results report it.
type BatchInfo struct {
	ID string
	// Index is the raft index of the submit that created it, Created its
	// log time.
	Index   uint64
	Created time.Time
	// Members counts the jobs the submit created in it; Counts them by
	// their state (a member swept counts in its last state).
	Members int
	Counts  Counts
	// Done: every member ended, at Completed; CompletionJob is the ID the
	// completion job has (or had, or would have had: see the file
	// comment), "" without a template.
	Done          bool
	Completed     time.Time
	CompletionJob string
	// Sum is the request sum of the submit that created it (SubmitCmd.Sum):
	// a client that retried that submit tells its own batch by it.
	Sum uint64
}

// Failed counts the members that ended otherwise than succeeded.
func (b BatchInfo) Failed() int { return b.Counts.Dead + b.Counts.Canceled }

// group is a batch's record. Immutable once published: changes copy it.
type group struct {
	id           string
	index        uint64
	created      int64
	seqLo, seqHi uint64 // the members' submit sequences
	members      uint32
	counts       [numStates]uint32
	done         bool
	doneAt       int64
	sum          uint64
	cjob         string  // the completion job's ID, "" without template
	tmpl         *NewJob // the completion template, nil none
	hash         [4]uint64
}

type groupTree = btree.BTreeG[*group]

func newGroupTree() *groupTree {
	return btree.NewBTreeGOptions(func(a, b *group) bool { return a.id < b.id }, btree.Options{NoLocks: true})
}

// open counts members not ended.
func (g *group) open() uint32 {
	return g.members - g.counts[StateSucceeded] - g.counts[StateDead] - g.counts[StateCanceled]
}

func (g *group) public() BatchInfo {
	c := g.counts
	b := BatchInfo{ID: g.id, Index: g.index, Created: fromNanos(g.created), Members: int(g.members),
		Counts: Counts{Pending: int(c[StatePending]), Scheduled: int(c[StateScheduled]), Running: int(c[StateRunning]),
			Succeeded: int(c[StateSucceeded]), Dead: int(c[StateDead]), Canceled: int(c[StateCanceled]), Waiting: int(c[StateWaiting])},
		Done: g.done, CompletionJob: g.cjob, Sum: g.sum}
	if g.done {
		b.Completed = fromNanos(g.doneAt)
	}
	return b
}

func (s *state) group(id string) *group {
	if s.dep.groups == nil {
		return nil
	}
	g, _ := s.dep.groups.Get(&group{id: id})
	return g
}

// setGroup publishes n in place of old (nil: a new batch), keeping the
// digest accumulator.
func (s *state) setGroup(old, n *group) {
	if s.dep.groups == nil {
		s.dep.groups = newGroupTree()
	}
	if old != nil {
		lanesSub(&s.dep.gacc, old.hash)
	}
	s.buf = appendGroup(s.buf[:0], n, true)
	h := sha256.Sum256(s.buf)
	for i := range n.hash {
		n.hash[i] = binary.LittleEndian.Uint64(h[i*8:])
	}
	lanesAdd(&s.dep.gacc, n.hash)
	s.dep.groups.Set(n)
}

func lanesAdd(acc *[4]uint64, v [4]uint64) {
	for i := range v {
		acc[i] += v[i]
	}
}

func lanesSub(acc *[4]uint64, v [4]uint64) {
	for i := range v {
		acc[i] -= v[i]
	}
}

// batchFree refuses a submit naming a batch that exists.
func (s *state) batchFree(b *BatchSpec, c *SubmitCmd) *refusal {
	g := s.group(b.ID)
	if g == nil {
		return nil
	}
	same := "another request"
	if g.sum == c.Sum() {
		same = "this same request"
	}
	return refuse(CodeBatchExists, "batch %q exists, created at index %d by %s", b.ID, g.index, same)
}

// newGroup creates the batch of a submit at entry e: members counts the
// jobs it created by state, in submit sequences lo..hi.
func (s *state) newGroup(e Entry, now int64, c *SubmitCmd, counts [numStates]uint32, lo, hi uint64) {
	g := &group{id: strings.Clone(c.Batch.ID), index: e.Index, created: now, seqLo: lo, seqHi: hi, counts: counts, sum: c.Sum()}
	for _, n := range counts {
		g.members += n
	}
	if t := c.Batch.Completion; t != nil {
		tmpl := *t
		g.tmpl = &tmpl
		if g.cjob = t.ID; g.cjob == "" {
			g.cjob = derivedID(e.Index, len(c.Jobs))
		}
	}
	s.setGroup(nil, g)
	s.dep.due = append(s.dep.due, g.id)
}

// groupMove counts member n's move from state from in its batch.
func (s *state) groupMove(n *job, from State) {
	g := s.group(n.dep().batch)
	if g == nil || n.seq < g.seqLo || n.seq > g.seqHi {
		return
	}
	c := *g
	c.counts[from]--
	c.counts[n.state]++
	s.setGroup(g, &c)
	if !c.done && (c.open() == 0 || (bugs.On("batchearly") && n.state.Terminal())) {
		s.dep.due = append(s.dep.due, c.id)
	}
}

// completeDue completes the batches of this entry whose members all
// ended, in ID order, creating their completion jobs.
func (s *state) completeDue(now int64, r *result) {
	slices.Sort(s.dep.due)
	for _, id := range slices.Compact(s.dep.due) {
		g := s.group(id)
		if g == nil || g.done || (g.open() > 0 && !bugs.On("batchearly")) {
			continue
		}
		c := *g
		c.done, c.doneAt = true, now
		s.setGroup(g, &c)
		r.completed = append(r.completed, &c)
		if j := s.completion(&c, now); j != nil {
			r.cascade = append(r.cascade, cascaded{kind: CascadeCompletion, job: j})
		}
	}
	s.dep.due = s.dep.due[:0]
}

// completion creates g's completion job, nil when it has no template or
// a job with its ID or idempotency key is held.
func (s *state) completion(g *group, now int64) *job {
	t := g.tmpl
	if t == nil || s.get(g.cjob) != nil {
		return nil
	}
	if t.IdempotencyKey != "" {
		if _, held := s.keys.Get(keyEnt{key: t.IdempotencyKey}); held {
			return nil
		}
	}
	cls := s.class(s.queueOrCreate(t.Queue), keyOf(t.Kind, t.Backoff.withDefaults(), t.MaxAttempts))
	s.seq++
	j := newRecord(t, g.cjob, s.seq, now, cls)
	j.ready(now)
	s.insert(j)
	return j
}

// sweepGroups removes the completed batches completed at or before
// cutoff.
func (s *state) sweepGroups(cutoff int64) {
	if s.dep.groups == nil {
		return
	}
	var gone []*group
	s.dep.groups.Scan(func(g *group) bool {
		if g.done && g.doneAt <= cutoff {
			gone = append(gone, g)
		}
		return true
	})
	for _, g := range gone {
		lanesSub(&s.dep.gacc, g.hash)
		s.dep.groups.Delete(g)
	}
}

// appendDigest appends the batches' part of the state digest: nothing
// without batches (so a state without any digests as before them), else
// a tag, their count and the accumulator of their records' hashes.
func (d *depState) appendDigest(b []byte) []byte {
	if d.groups == nil || d.groups.Len() == 0 {
		return b
	}
	b = append(b, 'B')
	b = binary.BigEndian.AppendUint64(b, uint64(d.groups.Len()))
	for _, v := range d.gacc {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// Batch returns the batch with the given ID.
func (m *Jobs) Batch(id string) (BatchInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.st.dep.groups == nil {
		return BatchInfo{}, false
	}
	g, ok := m.st.dep.groups.Get(&group{id: id})
	if !ok {
		return BatchInfo{}, false
	}
	return g.public(), true
}

// Batches returns up to limit batches (0: DefaultListLimit, at most
// MaxListLimit) in ID order, those after ID after ("" from the first).
func (m *Jobs) Batches(after string, limit int) []BatchInfo {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []BatchInfo
	if m.st.dep.groups == nil {
		return nil
	}
	m.st.dep.groups.Ascend(&group{id: after}, func(g *group) bool {
		if after != "" && g.id == after {
			return true
		}
		out = append(out, g.public())
		return len(out) < limit
	})
	return out
}

// Batch record encoding (snapshot 'B' records, digests, results):
//
//	id (str) | index (uvarint) | created (varint ns) | seqLo, seqHi (uvarint) |
//	members (uvarint) | count of each state pending..waiting (7 uvarints) |
//	done (byte 0/1) | [doneAt (varint ns), only when done] | sum (8 bytes, big endian) |
//	completion job id (str) | template (byte 0/1) [| the template as a
//	submitted job of a version 1 submit]
//
// Results carry batches without their template (the byte 0).
func appendGroup(b []byte, g *group, withTemplate bool) []byte {
	b = appendStr(b, g.id)
	b = binary.AppendUvarint(b, g.index)
	b = binary.AppendVarint(b, g.created)
	b = binary.AppendUvarint(b, g.seqLo)
	b = binary.AppendUvarint(b, g.seqHi)
	b = binary.AppendUvarint(b, uint64(g.members))
	for st := StatePending; st < numStates; st++ {
		b = binary.AppendUvarint(b, uint64(g.counts[st]))
	}
	b = appendBool(b, g.done)
	if g.done {
		b = binary.AppendVarint(b, g.doneAt)
	}
	b = binary.BigEndian.AppendUint64(b, g.sum)
	b = appendStr(b, g.cjob)
	if g.tmpl == nil || !withTemplate {
		return append(b, 0)
	}
	b = append(b, 1)
	return appendNewJob(b, g.tmpl)
}

func decodeGroup(d *decoder) *group {
	g := &group{id: d.str(), index: d.uvarint(), created: d.varint(), seqLo: d.uvarint(), seqHi: d.uvarint(), members: d.u32()}
	for st := StatePending; st < numStates; st++ {
		g.counts[st] = d.u32()
	}
	g.done = d.bool()
	if g.done {
		g.doneAt = d.varint()
	}
	g.sum = d.u64()
	g.cjob = d.str()
	if d.bool() {
		g.tmpl = new(NewJob)
		decodeNewJob(d, g.tmpl)
	}
	return g
}

// checkGroup verifies a restored batch record: a reason or "".
func checkGroup(g *group, st *state) string {
	var sum uint32
	for _, n := range g.counts {
		sum += n
	}
	switch {
	case checkName("batch id", g.id) != nil:
		return "bad id"
	case g.index == 0 || g.index > st.index || g.seqHi > st.seq:
		return "index or sequence beyond the snapshot"
	case sum != g.members || (g.members > 0 && uint64(g.members) > g.seqHi-g.seqLo+1):
		return "counts do not add up to its members"
	case !g.done && g.open() == 0:
		return "every member ended but not done"
	case (g.tmpl == nil) != (g.cjob == ""):
		return "completion job id iff template violated"
	case g.tmpl != nil && (&BatchSpec{ID: g.id, Completion: g.tmpl}).validate() != nil:
		return "bad completion template"
	}
	return ""
}
