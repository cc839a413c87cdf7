package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/tidwall/btree"
)

// item orders a job inside one of its queue's indexes. Keys are inlined so
// tree searches never dereference records; items compare by (p, a, seq):
//
//	ready (pending):  p = ^priority, a = runAt, seq  (claim order)
//	sched (scheduled): a = runAt, seq
//	running:           a = lease deadline, seq
//	waiting:           a = creation time, seq
//	done (terminal):   a = finish time, seq
//
// p is 0 outside the ready index; ^priority (-priority-1, no overflow)
// orders higher priorities first. seq is unique per job, so items never
// tie. h is the job's handle (state.slots): items hold no pointer, so
// shifting them inside a tree node costs a plain copy (no write barriers
// while the collector marks) and the collector never scans queue trees.
// 24 bytes (TestRecordSizes): a tree node holds its items inline, and
// every pending job has one.
type item struct {
	a   int64
	seq uint64
	p   int32
	h   uint32
}

func itemLess(x, y item) bool {
	if x.p != y.p {
		return x.p < y.p
	}
	if x.a != y.a {
		return x.a < y.a
	}
	return x.seq < y.seq
}

// itemOf is j's item in its state's index (j.h must be set).
func itemOf(j *job) item {
	h := j.h
	switch j.state {
	case StatePending:
		return item{p: ^j.prio, a: j.runAt, seq: j.seq, h: h}
	case StateScheduled:
		return item{a: j.runAt, seq: j.seq, h: h}
	case StateRunning:
		return item{a: j.lease.deadline, seq: j.seq, h: h}
	case StateWaiting:
		return item{a: j.created, seq: j.seq, h: h}
	}
	return item{a: j.updated, seq: j.seq, h: h}
}

type tree = btree.BTreeG[item]

func newTree() *tree {
	return btree.NewBTreeGOptions(itemLess, btree.Options{NoLocks: true, Degree: 64})
}

// queue holds one queue's indexes. Queue structs belong to the live state
// only (snapshots copy the job tree, not queues), so they are mutated in
// place; the trees inside are btrees, the job records in them immutable.
// A record's class points to its queue (class.go): the apply goroutine
// follows it from live records only; a snapshot's records are read for
// their class's names and policy, never for the queue.
type queue struct {
	name    string
	paused  bool
	counts  [numStates]int
	total   int
	ready   *tree
	sched   *tree
	running *tree
	done    *tree
	waiting *tree // jobs waiting for their parents, by creation (deps.go)
	// byKind counts the pending and scheduled jobs per kind and, once
	// split, indexes them again per kind (same items, same order), for
	// claims that name kinds. An entry exists while it counts a job. Only
	// ever looked up by key, never iterated: map order cannot reach a
	// result.
	byKind map[string]*kindIndex
	// split: the kind trees are built. While every pending and scheduled
	// job is of one kind they are not: that kind's trees are ready and
	// sched themselves (most queues hold one kind, and building them cost
	// every submit and claim a second tree update). The second kind to
	// arrive splits the queue, building the trees from ready and sched
	// once; it stays split until it holds no pending or scheduled job.
	split bool
	// spare is an emptied kind index kept for the next kind to need one
	// (a queue that drains and refills would otherwise build two trees
	// per cycle). Empty, so nothing of it can reach a result.
	spare *kindIndex
	// classes interns the classes of the queue's jobs (class.go); an
	// entry exists while a job is of it. Looked up by key only.
	classes map[classKey]*class
}

// kindIndex is one kind's share of a queue's ready and sched trees: its
// count of pending and scheduled jobs and, in a split queue, its trees.
type kindIndex struct {
	n            int
	ready, sched *tree
}

func newQueue(name string) *queue {
	return &queue{name: name, ready: newTree(), sched: newTree(), running: newTree(), done: newTree(), waiting: newTree(), byKind: map[string]*kindIndex{}, classes: map[classKey]*class{}}
}

// kindTree returns kind's tree for state s (pending or scheduled), nil if
// the queue holds no pending or scheduled job of that kind.
func (q *queue) kindTree(kind string, s State) *tree {
	k := q.byKind[kind]
	switch {
	case k == nil || (s != StatePending && s != StateScheduled):
		return nil
	case !q.split:
		return q.tree(s) // the only kind
	case s == StatePending:
		return k.ready
	}
	return k.sched
}

// tree returns k's tree for state s (pending or scheduled), building
// k's trees if it has none yet.
func (k *kindIndex) tree(s State) *tree {
	if k.ready == nil {
		k.ready, k.sched = newTree(), newTree()
	}
	if s == StateScheduled {
		return k.sched
	}
	return k.ready
}

// index counts (or with add false uncounts) j under its kind when the job
// is pending or scheduled, and adds (removes) its item it to (from) its
// kind's tree when the queue is split. The queue's ready or sched tree
// already holds (no longer holds) it.
func (q *queue) index(st *state, j *job, it item, add bool) {
	if j.state != StatePending && j.state != StateScheduled {
		return
	}
	k := q.byKind[j.cls.kind]
	if add {
		if k == nil {
			if k, q.spare = q.spare, nil; k == nil {
				k = &kindIndex{}
			}
			q.byKind[j.cls.kind] = k
		}
		k.n++
		switch {
		case q.split:
			k.tree(j.state).Load(it) // Set, without a search when it goes last
		case len(q.byKind) > 1:
			q.splitKinds(st) // it included: ready or sched holds it
		}
		return
	}
	if k == nil {
		return
	}
	k.n--
	if q.split {
		k.tree(j.state).Delete(it)
	}
	if k.n == 0 {
		delete(q.byKind, j.cls.kind)
		q.spare = k
		if len(q.byKind) == 0 {
			q.split = false // every kind tree is empty
		}
	}
}

// splitKinds builds every kind's trees from the queue's ready and sched
// trees (once, when a second kind arrives).
func (q *queue) splitKinds(st *state) {
	q.split = true
	for _, s := range [...]State{StatePending, StateScheduled} {
		q.tree(s).Scan(func(it item) bool {
			q.byKind[st.rec(it).cls.kind].tree(s).Set(it)
			return true
		})
	}
}

func (q *queue) tree(s State) *tree {
	switch s {
	case StatePending:
		return q.ready
	case StateScheduled:
		return q.sched
	case StateRunning:
		return q.running
	case StateWaiting:
		return q.waiting
	}
	return q.done
}

type keyEnt struct{ key, id string }

// idEnt is a job-ID tree entry: a slot and its ID's first eight bytes as a
// big-endian number (zero-padded), compared first; equal prefixes compare
// the slots' IDs. Ordered by (pfx, id), which is ID order. A search for a
// time-ordered ID follows the path hint along the tree's right edge; one
// for a random client ID (UUIDv4) misses it and binary-searches every
// node, where comparing inline numbers costs no cache miss and comparing
// through slots cost two per step (the slot, then its ID's bytes): 44 %
// less CPU per UUIDv4 submit applied, 5 % more per time-ordered one (fsm
// BenchmarkApplySubmitIDs).
type idEnt struct {
	pfx uint64
	sl  *slot
}

func idLess(a, b idEnt) bool {
	if a.pfx != b.pfx {
		return a.pfx < b.pfx
	}
	return a.sl.j.id < b.sl.j.id
}

// idPrefix is id's first eight bytes as a big-endian number, zero-padded.
func idPrefix(id string) uint64 {
	var p [8]byte
	copy(p[:], id)
	return binary.BigEndian.Uint64(p[:])
}

// entOf is sl's job-ID tree entry.
func entOf(sl *slot) idEnt { return idEnt{pfx: idPrefix(sl.j.id), sl: sl} }

// slot is one job's entry in the job-ID tree: its current record (whose
// ID is the slot's: every record a slot holds is of one job), the
// record's digest contribution (hash), and the snapshot generation the slot
// was made in. While gen is the state's, no snapshot's tree holds the slot
// and the apply goroutine may write it in place (under the write lock, so
// queries see whole changes); once a snapshot is taken it is frozen.
//
// 48 bytes (TestRecordSizes): the ID is read through the record. gen is
// 32 bits, and when it would wrap, freeze starts over at 1 and marks every
// live slot of generation 0, so no slot a snapshot holds ever carries the
// live generation.
type slot struct {
	j   *job
	sum [4]uint64
	gen uint32
	h   uint32 // the job's handle: state.slots[h] is its live slot
}

// freeze starts a new generation: every slot existing now is frozen (a
// snapshot is about to copy the tree). Apply goroutine, under the write
// lock; a frozen slot's gen is read and written only there.
func (s *state) freeze() {
	if s.gen < math.MaxUint32 {
		s.gen++
		return
	}
	s.gen = 1
	for _, sl := range s.slots {
		if sl != nil {
			sl.gen = 0
		}
	}
}

// state is the whole replicated state plus its indexes.
type state struct {
	index uint64 // last applied raft index
	seq   uint64 // last submit sequence
	// jobs is the job-ID index, ordered and copy-on-write (snapshots
	// copy it). It holds slots, not records: a change of a job whose slot
	// no snapshot shares (gen) swaps the record inside the slot and
	// touches no tree node; only the first change of a job after a
	// snapshot copies its slot and sets the copy in the tree. A hash map
	// beside the tree for point lookups was measured (fsm
	// BenchmarkApplyCycle) and cost more CPU than it saved.
	jobs *btree.BTreeG[idEnt]
	// gen counts snapshots taken (freeze): slots of another generation
	// may be read by a snapshot's tree and their records are never
	// written again.
	gen uint32
	// slots maps a live job's handle (queue items hold handles, not
	// pointers) to its live slot; free lists unused handles. Handles are
	// internal: no result, record or order depends on them.
	slots []*slot
	free  []uint32
	// hint remembers the path of the last job-ID tree search (apply
	// goroutine only): a submit's duplicate check and its insert search
	// the same path.
	hint btree.PathHint
	// claims indexes running leases granted by claims with an ID: claim
	// ID -> IDs of its jobs still running under that claim's lease.
	// Derived from the records (rebuilt on restore); looked up by key
	// only, and answers are sorted by job ID, so map order cannot reach a
	// result.
	claims map[string][]string
	// limits holds the queues' limits (limit.go); uniq indexes the
	// unique keys held, key -> job ID (unique.go; derived from the
	// records, looked up by key only).
	limits *btree.BTreeG[*qlimit]
	uniq   map[uniqKey]string
	keys   *btree.BTreeG[keyEnt]
	queues *btree.BTreeG[*queue]
	acc    [4]uint64 // sum of per-job hashes, lane-wise mod 2^64
	clock  logClock  // the log's time (clock.go)
	dep    depState  // dependencies and batches (deps.go, batch_group.go)
	sch    schedules // the schedules (schedule_apply.go)

	// A cache that only saves memory (not state): interned kinds (the
	// classes' kind names, class.go), bounded so hostile input cannot grow
	// it forever.
	kinds map[string]string

	probe  slot // scratch key for job lookups on the apply goroutine (its record: probeJ)
	probeJ job
	qprobe queue   // scratch key for queue lookups on the apply goroutine
	src    sources // scratch claim sources on the apply goroutine
	// promo caches when the next scheduled job can be due (nothing
	// replicated): while ok, next is at or below every scheduled job's
	// run-at. A promote's scan of every queue sets it to the earliest
	// run-at left scheduled; a job entering the scheduled state lowers it.
	// promote skips the scan while its time is below next: a claim's
	// cost does not grow with the number of queues.
	promo struct {
		ok   bool
		next int64
	}
	buf []byte
	ids []byte // the chunk newDerivedID writes submitted jobs' IDs into
	// subs is Jobs.Apply's scratch for a submit's answers, set while it
	// applies an entry (nil otherwise).
	subs []sub
}

func newState() *state {
	return &state{
		jobs:   btree.NewBTreeGOptions(idLess, btree.Options{NoLocks: true, Degree: 64}),
		claims: map[string][]string{},
		limits: newLimits(),
		uniq:   map[uniqKey]string{},
		keys:   btree.NewBTreeGOptions(func(a, b keyEnt) bool { return a.key < b.key }, btree.Options{NoLocks: true}),
		queues: btree.NewBTreeGOptions(func(a, b *queue) bool { return a.name < b.name },
			btree.Options{NoLocks: true}),
	}
}

const maxInterned = 1024

// get looks a job up by ID (apply goroutine only: uses the scratch probe
// and hint).
func (s *state) get(id string) *job {
	s.probeJ.id = id
	s.probe.j = &s.probeJ
	e, _ := s.jobs.GetHint(idEnt{pfx: idPrefix(id), sl: &s.probe}, &s.hint)
	s.probeJ.id = ""
	if e.sl == nil {
		return nil
	}
	return e.sl.j
}

// getShared looks a job up for a query (under the read lock).
func (s *state) getShared(id string) *job {
	if e, _ := s.jobs.Get(idEnt{pfx: idPrefix(id), sl: &slot{j: &job{id: id}}}); e.sl != nil {
		return e.sl.j
	}
	return nil
}

func (s *state) queue(name string) *queue {
	s.qprobe.name = name
	q, _ := s.queues.Get(&s.qprobe)
	s.qprobe.name = ""
	return q
}

func (s *state) queueOrCreate(name string) *queue {
	if q := s.queue(name); q != nil {
		return q
	}
	q := newQueue(strings.Clone(name)) // not the decoder's chunk
	s.queues.Set(q)
	return q
}

// dropIfEmpty removes a queue that holds no job and is not paused, so the
// set of queues is a function of the jobs and the paused set.
func (s *state) dropIfEmpty(q *queue) {
	if q.total == 0 && !q.paused {
		s.queues.Delete(q)
	}
}

// hash is a record's digest contribution: SHA-256 of its encoding with
// payload, as four little-endian lanes. It is computed once per record,
// when the record is published, and kept in the record's slot (removing or
// replacing the record subtracts the kept sum).
func (s *state) hash(j *job) (sum [4]uint64) {
	sum, s.buf = jobSum(s.buf, j)
	return sum
}

// jobSum is j's digest contribution (hash), encoding j into buf, which
// it returns for reuse (a restore's decoders hash off the apply
// goroutine, each with a buffer of its own).
func jobSum(buf []byte, j *job) (sum [4]uint64, _ []byte) {
	buf = appendJob(buf[:0], j, true)
	h := sha256.Sum256(buf)
	for i := range sum {
		sum[i] = binary.LittleEndian.Uint64(h[i*8:])
	}
	return sum, buf
}

// accAdd adds a slot's contribution to the accumulator; accSub removes it.
func (s *state) accAdd(sl *slot) {
	for i, v := range sl.sum {
		s.acc[i] += v
	}
}

func (s *state) accSub(sl *slot) {
	for i, v := range sl.sum {
		s.acc[i] -= v
	}
}

// putSum publishes a new decoded job in every index, its class interned,
// with its hash given (a restore's decoders compute it). It reports false
// if the job's queue-index key collides (only possible with a corrupt
// snapshot).
func (s *state) putSum(j *job, sum [4]uint64) bool {
	q := s.queueOrCreate(j.cls.queue)
	j.cls = s.class(q, j.cls.classKey)
	return s.insertSum(j, sum)
}

// insert is put for a job whose class is interned already (its queue
// exists).
func (s *state) insert(j *job) bool { return s.insertSum(j, s.hash(j)) }

// insertSum is insert with j's hash given.
func (s *state) insertSum(j *job, sum [4]uint64) bool {
	q := j.cls.q
	j.h = s.handle()
	sl := &slot{j: j, sum: sum, gen: s.gen, h: j.h}
	s.slots[sl.h] = sl
	it := itemOf(j)
	if _, replaced := q.tree(j.state).Load(it); replaced {
		return false
	}
	j.cls.n++
	q.index(s, j, it, true)
	q.counts[j.state]++
	q.total++
	if j.state == StateScheduled {
		s.promo.next = min(s.promo.next, it.a)
	}
	s.jobs.SetHint(entOf(sl), &s.hint)
	s.indexClaim(j, true)
	s.indexKids(j, true)
	if j.key != "" {
		s.keys.Set(keyEnt{key: j.key, id: j.id})
	}
	if j.state == StateRunning && s.limits.Len() > 0 {
		s.limitMove(j, 1)
	}
	s.uniqueIndex(j, true)
	s.accAdd(sl)
	return true
}

// replace swaps the published record old for its modified copy n (same ID,
// class and key).
func (s *state) replace(old, n *job) {
	s.uniqueLeave(n)
	s.limitRunning(old, n)
	q := old.cls.q
	oi, ni := itemOf(old), itemOf(n)
	q.tree(old.state).Delete(oi)
	q.index(s, old, oi, false)
	q.counts[old.state]--
	q.tree(n.state).Load(ni)
	q.index(s, n, ni, true)
	q.counts[n.state]++
	if n.state == StateScheduled {
		s.promo.next = min(s.promo.next, ni.a)
	}
	s.publish(old, n)
	if claimOf(old) != claimOf(n) {
		s.indexClaim(old, false)
		s.indexClaim(n, true)
	}
	s.noteDeps(old, n)
}

// handle returns an unused job handle, growing slots if none is free.
func (s *state) handle() uint32 {
	if n := len(s.free); n > 0 {
		h := s.free[n-1]
		s.free = s.free[:n-1]
		return h
	}
	s.slots = append(s.slots, nil)
	return uint32(len(s.slots) - 1)
}

// rec is the live record an item of a queue index names.
func (s *state) rec(it item) *job { return s.slots[it.h].j }

// publish makes n, the modified copy of the published record old, the
// job's record in the job-ID index and the digest accumulator: in place
// when old's slot is of this generation (no snapshot holds it), else in a
// new slot set in the tree (the snapshot keeps the old one).
func (s *state) publish(old, n *job) {
	sl := s.slots[old.h]
	s.accSub(sl)
	if sl.gen != s.gen {
		sl = &slot{j: n, gen: s.gen, h: sl.h}
		s.jobs.SetHint(entOf(sl), &s.hint)
		s.slots[sl.h] = sl
	}
	sl.j, sl.sum = n, s.hash(n)
	s.accAdd(sl)
}

// claimOf is the (claim ID, token) of j's lease, zero if it has none or
// its claim had no ID.
func claimOf(j *job) (c struct {
	id    string
	token uint64
}) {
	if j.lease != nil && j.lease.claim != "" {
		c.id, c.token = j.lease.claim, j.lease.token
	}
	return c
}

// indexClaim adds (or removes) j under its lease's claim ID, if any.
func (s *state) indexClaim(j *job, add bool) {
	c := claimOf(j)
	if c.id == "" {
		return
	}
	ids := s.claims[c.id]
	if add {
		s.claims[c.id] = append(ids, j.id)
		return
	}
	if i := slices.Index(ids, j.id); i >= 0 {
		ids = slices.Delete(ids, i, i+1)
	}
	if len(ids) == 0 {
		delete(s.claims, c.id)
	} else {
		s.claims[c.id] = ids
	}
}

// claimed returns the running jobs leased by the claim with ID id, in job
// ID order.
func (s *state) claimed(id string) []*job {
	if len(s.claims[id]) == 0 {
		return nil
	}
	ids := slices.Sorted(slices.Values(s.claims[id])) // a copy: answers in job ID order
	out := make([]*job, len(ids))
	for i, jid := range ids {
		out[i] = s.get(jid)
	}
	return out
}

// remove deletes a job and its idempotency key from every index.
func (s *state) remove(j *job) {
	c := j.cls
	q := c.q
	it := itemOf(j)
	q.tree(j.state).Delete(it)
	q.index(s, j, it, false)
	q.counts[j.state]--
	q.total--
	if c.n--; c.n == 0 {
		delete(q.classes, c.classKey)
	}
	sl := s.slots[j.h]
	s.jobs.DeleteHint(entOf(sl), &s.hint)
	s.slots[j.h] = nil
	s.free = append(s.free, j.h)
	s.indexClaim(j, false)
	s.indexKids(j, false)
	if j.key != "" {
		s.keys.Delete(keyEnt{key: j.key})
	}
	if j.state == StateRunning && s.limits.Len() > 0 {
		s.limitMove(j, -1)
	}
	s.uniqueIndex(j, false)
	s.accSub(sl)
	s.dropIfEmpty(q)
}

// sum is the digest of the whole state: SHA-256 over a domain tag, the
// applied index, the submit sequence, the log clock, the job-hash
// accumulator, the names of paused queues in order and the queues'
// limits (limit.go; nothing when there are none). O(paused queues +
// limited queues).
func (s *state) sum() [32]byte { return s.digest(true) }

// digest computes sum; without the clock it is the digest of snapshot
// versions 1 to 3, which had none (readSnapshot checks those against it).
func (s *state) digest(clock bool) [32]byte {
	h := sha256.New()
	var b []byte
	if clock {
		b = append(b, "jobraft/fsm.Jobs digest v2\x00"...)
	} else {
		b = append(b, "jobraft/fsm.Jobs digest v1\x00"...)
	}
	b = binary.BigEndian.AppendUint64(b, s.index)
	b = binary.BigEndian.AppendUint64(b, s.seq)
	if clock {
		b = s.clock.append(b)
	}
	for _, v := range s.acc {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = s.appendSchedDigest(b)
	s.queues.Scan(func(q *queue) bool {
		if q.paused {
			b = appendStr(b, q.name)
		}
		return true
	})
	b = s.dep.appendDigest(b)
	b = s.appendLimitsDigest(b)
	h.Write(b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// pausedNames lists the paused queues in name order.
func (s *state) pausedNames() []string {
	var names []string
	s.queues.Scan(func(q *queue) bool {
		if q.paused {
			names = append(names, q.name)
		}
		return true
	})
	return names
}
