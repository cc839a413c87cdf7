package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"
	"unsafe"
)

// job is the stored record. Once a *job is published in a tree it is never
// mutated (snapshots share it): modifications copy it first (see clone).
//
// 128 bytes, a size class every pending job fills (TestRecordSizes): what
// a job shares with its queue's other jobs of its kind and retry policy is
// one pointer to their class (class.go); what is rarely set is behind
// pointers (lease, outcome, last lease end); the payload is a string
// header. A field that pushes the record past 128 bytes costs every job
// 16 bytes more (the next size class, 144).
type job struct {
	id, key string
	// payload is the job's payload bytes viewed as a string (16 bytes, a
	// slice takes 24): a copy nobody writes, the decoder's (viewString).
	// payloadBytes shares them as a slice.
	payload string
	cls     *class    // queue, kind, backoff policy, max attempts (class.go)
	lease   *lease    // running only
	out     *outcome  // last error, result, dependencies and unique key, nil when all empty
	end     *leaseEnd // how the last lease ended (leaseend.go), nil: none recorded
	runAt   int64     // unix ns
	// created, updated: unix ns; updated = finish time once terminal
	created, updated int64
	seq              uint64 // submit sequence
	prio             int32
	attempts         uint32
	// h is the job's handle: state.slots[h] is its live slot (state.go).
	// Set when the record is first published (insert), kept by clone: a
	// job's handle is its own while it lives. Not part of the record's
	// encoding or digest.
	h     uint32
	state State
}

type lease struct {
	token    uint64
	worker   string
	deadline int64
	ttl      int64
	term     uint64
	claim    string // the granting claim's ID (ClaimCmd.ID), "" if none
}

// outcome holds a record's rarely set parts (the record stays in its
// size class: TestRecordSizes): the last error, the result, the job's
// parents and batch (deps.go, nil: none) and its unique key (unique.go,
// nil: not unique). Immutable once published, as the record.
type outcome struct {
	lastErr string
	result  []byte
	deps    *jobDeps
	uq      *uniq
}

// dep returns the job's parents and batch, nil if none.
func (j *job) dep() *jobDeps {
	if j.out == nil {
		return nil
	}
	return j.out.deps
}

// uniq is the record's unique key, nil if the job is not unique.
func (j *job) uniq() *uniq {
	if j.out == nil {
		return nil
	}
	return j.out.uq
}

// setDeps sets the job's parents and batch (j is a private copy).
func (j *job) setDeps(d *jobDeps) {
	var o outcome
	if j.out != nil {
		o = *j.out
	}
	o.deps = d
	j.setOut(o)
}

// setUniq sets the record's unique key (j is a private copy).
func (j *job) setUniq(u *uniq) {
	var o outcome
	if j.out != nil {
		o = *j.out
	}
	o.uq = u
	j.setOut(o)
}

// setOut makes o the record's outcome, none when it is empty.
func (j *job) setOut(o outcome) {
	j.out = nil
	if o.lastErr != "" || len(o.result) > 0 || o.deps != nil || o.uq != nil {
		j.out = &o
	}
}

func (j *job) clone() *job {
	c := *j
	return &c
}

func (j *job) lastErr() string {
	if j.out == nil {
		return ""
	}
	return j.out.lastErr
}

func (j *job) result() []byte {
	if j.out == nil {
		return nil
	}
	return j.out.result
}

func (j *job) setOutcome(lastErr string, result []byte) {
	d, u := j.dep(), j.uniq()
	if lastErr == "" && len(result) == 0 && d == nil && u == nil {
		j.out = nil
		return
	}
	j.out = &outcome{lastErr: lastErr, result: result, deps: d, uq: u}
}

// hasOutcome reports whether the job has a last error or result (record
// flag 2).
func (j *job) hasOutcome() bool {
	return j.out != nil && (j.out.lastErr != "" || len(j.out.result) > 0)
}

// payloadBytes is the record's payload as a slice sharing its bytes (nil
// when empty), which nobody may write.
func (j *job) payloadBytes() []byte {
	if j.payload == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(j.payload), len(j.payload))
}

// viewString is p viewed as a string, without a copy: p must never be
// written again (a decoder's copy).
func viewString(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

// public converts a record to the caller's Job. Slices are shared with
// the record: what leaves the package goes through owned first.
func (j *job) public(withPayload bool) Job { return j.publicWith(j.cls, j.lease, j.end, withPayload) }

// publicWith is public with the record's class, lease and last lease end
// given (a decoded record's, which j does not point to: a class j pointed
// to would escape).
func (j *job) publicWith(c *class, l *lease, e *leaseEnd, withPayload bool) Job {
	p := Job{
		ID: j.id, Queue: c.queue, Kind: c.kind,
		Priority: j.prio, RunAt: fromNanos(j.runAt), MaxAttempts: c.maxAtt,
		Backoff: c.bo, IdempotencyKey: j.key, Attempts: j.attempts,
		State: j.state, LastError: j.lastErr(), Result: j.result(), Seq: j.seq,
		Created: fromNanos(j.created), Updated: fromNanos(j.updated),
	}
	if withPayload {
		p.Payload = j.payloadBytes()
	}
	if j.state.Terminal() {
		p.Finished = p.Updated
	}
	if l != nil {
		p.Lease = &Lease{Token: l.token, Worker: l.worker, Deadline: fromNanos(l.deadline), TTL: time.Duration(l.ttl), Term: l.term, ClaimID: l.claim}
	}
	if e != nil {
		p.LastLease = &LeaseEnd{Token: e.token, By: e.by, Sum: e.sum}
	}
	j.dep().setPublic(&p)
	p.Unique = j.uniq().public()
	return p
}

// owned is j.public(withPayload) with every slice copied: a query's
// answer is the caller's to keep and to write, and writing into it changes
// nothing in the state (its digest, its snapshots, the other callers'
// answers).
func (j *job) owned(withPayload bool) Job {
	p := j.public(withPayload)
	p.Payload = bytes.Clone(p.Payload)
	p.Result = bytes.Clone(p.Result)
	p.After = slices.Clone(p.After)
	p.Unmet = slices.Clone(p.Unmet)
	return p
}

// Job record encoding, shared by snapshots, digests and results:
//
//	id, queue, kind, key (str) | payload (bytes; empty when omitted) |
//	priority (varint) | maxAttempts, attempts (uvarint) | state (byte) |
//	runAt, created, updated (varint ns) | seq (uvarint) |
//	backoff base, max (varint ns) | factor (uvarint) | jitter (byte) |
//	flags (byte: 1 lease, 2 outcome, 4 last lease end, 8 claim id, 16 request sum) |
//	[lease: token (uvarint), worker (str), deadline, ttl (varint), term (uvarint)] |
//	[outcome: lastError (str), result (bytes)] |
//	[last lease end: token (uvarint), kind (byte)] |
//	[claim id: the lease's claim ID (str, not empty; only with a lease)] |
//	[request sum: the last lease end's (8 bytes, big endian, not 0; only
//	 with flag 4 and an end by nak or term)] |
//	[dependencies (flag 32): parents, unmet ones, policy, batch (deps_codec.go)] |
//	[unique key (flag 64): period, window (varint ns), states (byte), held
//	 (byte) (unique.go)]
//
// Flags 32 and 64 are new in snapshot version 6 and result version 5; a
// record without them encodes as before.
// Flag 16 is new in snapshot version 5 and result version 4; a record
// without it encodes as before.
// Flag 8 is new in snapshot version 3 and result version 3; a record
// without it encodes as before.
// Flag 4 is new in snapshot version 2 and result version 2; a record
// without it encodes exactly as before, so digests of jobs that never had
// a lease end recorded are unchanged.
const (
	flagLease   = 1
	flagOutcome = 2
	flagEnd     = 4
	flagClaim   = 8
	flagSum     = 16
	flagUnique  = 64
)

func appendJob(b []byte, j *job, withPayload bool) []byte {
	c := j.cls
	b = appendStr(b, j.id)
	b = appendStr(b, c.queue)
	b = appendStr(b, c.kind)
	b = appendStr(b, j.key)
	if withPayload {
		b = appendStr(b, j.payload)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendVarint(b, int64(j.prio))
	b = binary.AppendUvarint(b, uint64(c.maxAtt))
	b = binary.AppendUvarint(b, uint64(j.attempts))
	b = append(b, byte(j.state))
	b = binary.AppendVarint(b, j.runAt)
	b = binary.AppendVarint(b, j.created)
	b = binary.AppendVarint(b, j.updated)
	b = binary.AppendUvarint(b, j.seq)
	b = binary.AppendVarint(b, int64(c.bo.Base))
	b = binary.AppendVarint(b, int64(c.bo.Max))
	b = binary.AppendUvarint(b, uint64(c.bo.Factor))
	b = append(b, c.bo.Jitter)
	var flags byte
	if j.lease != nil {
		flags |= flagLease
	}
	if j.hasOutcome() {
		flags |= flagOutcome
	}
	if j.end != nil {
		flags |= flagEnd
		if j.end.sum != 0 {
			flags |= flagSum
		}
	}
	if j.lease != nil && j.lease.claim != "" {
		flags |= flagClaim
	}
	if j.dep() != nil {
		flags |= flagDeps
	}
	if j.uniq() != nil {
		flags |= flagUnique
	}
	b = append(b, flags)
	if l := j.lease; l != nil {
		b = binary.AppendUvarint(b, l.token)
		b = appendStr(b, l.worker)
		b = binary.AppendVarint(b, l.deadline)
		b = binary.AppendVarint(b, l.ttl)
		b = binary.AppendUvarint(b, l.term)
	}
	if o := j.out; j.hasOutcome() {
		b = appendStr(b, o.lastErr)
		b = appendBytes(b, o.result)
	}
	if e := j.end; e != nil {
		b = binary.AppendUvarint(b, e.token)
		b = append(b, byte(e.by))
	}
	if flags&flagClaim != 0 {
		b = appendStr(b, j.lease.claim)
	}
	if flags&flagSum != 0 {
		b = binary.BigEndian.AppendUint64(b, j.end.sum)
	}
	if d := j.dep(); d != nil {
		b = appendDeps(b, d)
	}
	if u := j.uniq(); u != nil {
		b = appendUniq(b, u)
	}
	return b
}

// jobSize is the length appendJob(nil, j, withPayload) returns.
func jobSize(j *job, withPayload bool) int {
	str := func(n int) int { return uvarintLen(uint64(n)) + n }
	c := j.cls
	n := str(len(j.id)) + str(len(c.queue)) + str(len(c.kind)) + str(len(j.key)) + 1
	if withPayload {
		n += str(len(j.payload)) - 1
	}
	n += varintLen(int64(j.prio)) + uvarintLen(uint64(c.maxAtt)) + uvarintLen(uint64(j.attempts)) + 1 +
		varintLen(j.runAt) + varintLen(j.created) + varintLen(j.updated) + uvarintLen(j.seq) +
		varintLen(int64(c.bo.Base)) + varintLen(int64(c.bo.Max)) + uvarintLen(uint64(c.bo.Factor)) + 1 + 1
	if l := j.lease; l != nil {
		n += uvarintLen(l.token) + str(len(l.worker)) + varintLen(l.deadline) + varintLen(l.ttl) + uvarintLen(l.term)
		if l.claim != "" {
			n += str(len(l.claim))
		}
	}
	if o := j.out; j.hasOutcome() {
		n += str(len(o.lastErr)) + str(len(o.result))
	}
	if e := j.end; e != nil {
		n += uvarintLen(e.token) + 1
		if e.sum != 0 {
			n += 8
		}
	}
	if d := j.dep(); d != nil {
		n += depsSize(d)
	}
	if u := j.uniq(); u != nil {
		n += uniqSize(u)
	}
	return n
}

// decodeJobIn reads one record, its class (queue, kind, policy) written
// to *c, which the record points to until a state interns it
// (state.putSum): a snapshot's restore keeps c beside the record and
// allocates no class per record. It checks structure only; snapshot
// restore checks invariants separately (checkJob).
func decodeJobIn(d *decoder, c *class) *job {
	j := &job{cls: c}
	l, leased, e := decodeJobInto(d, j, c)
	if leased {
		j.lease = new(lease)
		*j.lease = l
	}
	if e.by != EndNone {
		j.end = new(leaseEnd)
		*j.end = e
	}
	if u := j.uniq(); u != nil {
		u.sum = sha256.Sum256(j.payloadBytes())
	}
	return j
}

// decodePublic reads one record as the caller's Job: no record or class
// is allocated on the way (results decode this way).
func decodePublic(d *decoder, withPayload bool) Job {
	var j job
	var c class
	l, leased, e := decodeJobInto(d, &j, &c)
	var lp *lease
	if leased {
		lp = &l
	}
	var ep *leaseEnd
	if e.by != EndNone {
		ep = &e
	}
	return j.publicWith(&c, lp, ep, withPayload)
}

// decodeJobInto reads one record into j but its class, its lease (if
// leased) and its last lease end (by EndNone if none): the class's fields
// go to c, the lease and the last lease end are returned (j.cls, a class
// of the record's own, j.lease and j.end are the caller's to set).
func decodeJobInto(d *decoder, j *job, c *class) (l lease, leased bool, e leaseEnd) {
	j.id = d.str()
	c.queue = d.str()
	c.kind = d.str()
	j.key = d.str()
	if d.noPayload {
		d.raw()
	} else {
		j.payload = viewString(d.bytes()) // a copy nobody writes (a view decoder's input: read only)
	}
	j.prio = d.i32()
	c.maxAtt = d.u32()
	j.attempts = d.u32()
	j.state = State(d.byte())
	j.runAt = d.varint()
	j.created = d.varint()
	j.updated = d.varint()
	j.seq = d.uvarint()
	c.bo = Backoff{Base: time.Duration(d.varint()), Max: time.Duration(d.varint()), Factor: d.u32(), Jitter: d.byte()}
	flags := d.byte()
	if flags&^(flagLease|flagOutcome|flagEnd|flagClaim|flagSum|flagDeps|flagUnique) != 0 {
		d.fail("job flags %#x", flags)
	}
	if flags&flagLease != 0 {
		l, leased = lease{token: d.uvarint(), worker: d.str(), deadline: d.varint(), ttl: d.varint(), term: d.uvarint()}, true
	}
	if flags&flagOutcome != 0 {
		j.out = &outcome{lastErr: d.str(), result: d.bytes()}
	}
	if flags&flagEnd != 0 {
		e.token = d.uvarint()
		e.by = EndKind(d.byte())
		if e.by == EndNone {
			d.fail("last lease end of kind none") // flag 4 means an end
		}
	}
	if flags&flagClaim != 0 {
		if !leased {
			d.fail("claim id without a lease")
		} else if l.claim = d.str(); l.claim == "" {
			d.fail("empty claim id") // flag 8 means an id
		}
	}
	if flags&flagSum != 0 {
		switch e.sum = d.u64(); {
		case flags&flagEnd == 0:
			d.fail("request sum without a last lease end")
		case e.sum == 0:
			d.fail("request sum 0") // flag 16 means a sum
		}
	}
	if flags&flagDeps != 0 {
		j.setDeps(decodeDeps(d))
	}
	if flags&flagUnique != 0 {
		j.setUniq(decodeUniq(d))
	}
	return l, leased, e
}

// checkJob verifies a restored record's invariants; it returns a reason or "".
func checkJob(j *job) string {
	switch {
	case checkID(j.id) != nil:
		return "bad id"
	case checkName("queue", j.cls.queue) != nil || checkName("kind", j.cls.kind) != nil:
		return "bad queue or kind"
	case len(j.key) > MaxKeyLen || len(j.payload) > MaxPayload:
		return "oversize key or payload"
	case !j.state.Valid():
		return "bad state"
	case (j.lease != nil) != (j.state == StateRunning):
		return "lease present iff running violated"
	case j.out != nil && !j.hasOutcome() && j.out.deps == nil && j.out.uq == nil:
		return "empty outcome record"
	case j.cls.bo.validate() != nil || j.cls.bo != j.cls.bo.withDefaults():
		return "bad backoff"
	case j.cls.maxAtt == 0:
		return "zero max attempts"
	}
	if why := checkDeps(j); why != "" {
		return why
	}
	if why := checkUniq(j); why != "" {
		return why
	}
	if l := j.lease; l != nil && (l.worker == "" || l.token == 0 || l.ttl <= 0 || len(l.claim) > MaxNameLen) {
		return "bad lease"
	}
	e := j.end
	if e == nil {
		return ""
	}
	if e.by == EndNone || e.by >= numEnds || e.token == 0 {
		return "bad last lease end"
	}
	if e.sum != 0 && e.by != EndNaked && e.by != EndTermed {
		return "request sum of a lease end by neither nak nor term"
	}
	if e.by == EndAcked && j.state != StateSucceeded || j.state == StateSucceeded && e.by != EndAcked {
		return "succeeded iff last lease acked violated"
	}
	if l := j.lease; l != nil && e.token >= l.token {
		return "last lease end not before the running lease"
	}
	return ""
}
