package fsm

import (
	"github.com/jobraft/jobraft/internal/test/bugs"
	"math"
	"strconv"
	"time"
	"unsafe"
)

// This file is the job state machine proper: one handler per command. Every
// handler validates everything it needs before its first mutation, so a
// refusal leaves the state unchanged. See docs/jobs.md for the table of
// transitions.

const leaseExpiredMsg = "lease expired"

// apply applies one decoded command (c, or the decode error derr) as the
// entry e. The caller holds the write lock.
func (s *state) apply(e Entry, c Command, derr error) *result {
	r := &result{index: e.Index}
	if c != nil {
		r.cmd = c.Type()
	} else if len(e.Cmd) >= 2 && CommandType(e.Cmd[1]) < numCmds {
		r.cmd = CommandType(e.Cmd[1])
	}
	if s.index != 0 && e.Index <= s.index {
		r.code, r.detail = CodeIndexNotIncreasing, "entry "+strconv.FormatUint(e.Index, 10)+" at applied "+strconv.FormatUint(s.index, 10)
		return r
	}
	s.index = e.Index
	now := s.clock.advance(e.Term, toNanos(e.Time))
	if derr != nil {
		r.code, r.detail = codeOf(derr), derr.Error()
		return r
	}
	s.applyOne(e, now, c, r)
	return r
}

// applyOne validates and applies one decoded command at entry e (alone, or
// as one command of a batch) and log time now (clock.go), filling r.
func (s *state) applyOne(e Entry, now int64, c Command, r *result) {
	if rf := validate(c, false); rf != nil {
		r.code, r.detail = rf.code, rf.detail
		return
	}
	var rf *refusal
	switch c := c.(type) {
	case *SubmitCmd:
		s.submit(e, now, c, r)
	case *BatchCmd:
		s.batch(e, now, c, r)
	case *ClaimCmd:
		rf = s.claim(e, now, c, r)
	case *ExtendCmd:
		rf = s.extend(e, now, c, r)
	case *AckCmd:
		rf = s.ack(now, c, r)
	case *NakCmd:
		rf = s.nak(now, c, r)
	case *TermCmd:
		rf = s.term(now, c, r)
	case *CancelCmd:
		rf = s.cancel(now, c, r)
	case *RetryCmd:
		rf = s.retry(now, c, r)
	case *ExpireCmd:
		if c.Term != 0 && c.Term != e.Term {
			rf = refuse(CodeInvalidState, "expire proposed for term %d, appended in term %d", c.Term, e.Term)
		} else {
			s.expire(e, now, c, r)
		}
	case *PauseCmd:
		q := s.queueOrCreate(c.Queue)
		r.changed = !q.paused
		q.paused = true
	case *ResumeCmd:
		if q := s.queue(c.Queue); q != nil && q.paused {
			q.paused = false
			r.changed = true
			s.dropIfEmpty(q)
		}
	case *SweepCmd:
		s.sweep(now, c, r)
	case *ScheduleCmd, *ScheduleSetCmd, *FireCmd:
		rf = s.applySchedule(e, now, c, r)
	case *SetLimitCmd, *ClearLimitCmd, *SetRateCmd, *ClearRateCmd:
		s.applyLimit(now, c, r)
	}
	if rf != nil {
		r.code, r.detail = rf.code, rf.detail
	}
	if len(s.dep.work) > 0 || len(s.dep.due) > 0 {
		s.settle(now, r)
	}
}

// derivedID names a job submitted without an ID: unique per (entry, batch
// position), and outside the caller's ID space (callers may not use '@').
func derivedID(index uint64, pos int) string { return string(appendDerivedID(nil, index, pos)) }

// appendDerivedID appends derivedID(index, pos) to b: '@', the index in 16
// hex digits, '.', the position in hex.
func appendDerivedID(b []byte, index uint64, pos int) []byte {
	var h [16]byte
	hex := strconv.AppendUint(h[:0], index, 16)
	b = append(b, '@')
	for i := len(hex); i < 16; i++ {
		b = append(b, '0')
	}
	b = append(b, hex...)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(pos), 16)
}

// newDerivedID is derivedID(index, pos) in the state's ID chunk (apply
// goroutine only): a submit's derived IDs share one allocation per
// arenaChunk bytes instead of one each. As with the decoder's strings, a
// kept ID keeps its chunk alive; bytes once written there never change.
func (s *state) newDerivedID(index uint64, pos int) string {
	const most = 1 + 16 + 1 + 16
	if cap(s.ids)-len(s.ids) < most {
		s.ids = make([]byte, 0, arenaChunk)
	}
	at := len(s.ids)
	s.ids = appendDerivedID(s.ids, index, pos)
	return unsafe.String(&s.ids[at], len(s.ids)-at)
}

func (s *state) submit(e Entry, now int64, c *SubmitCmd, r *result) {
	if c.Batch != nil {
		if rf := s.batchFree(c.Batch, c); rf != nil {
			r.code, r.detail = rf.code, rf.detail
			return
		}
	}
	if r.subs = s.subs[:0]; cap(r.subs) < len(c.Jobs) {
		r.subs = make([]sub, 0, len(c.Jobs))
	}
	r.subs = r.subs[:len(c.Jobs)]
	// Jobs naming others of this submit as parents are created after them
	// (deps.go); order is nil when none does.
	order, cyclic := depOrder(c.Jobs)
	var batch string
	var members [numStates]uint32
	if c.Batch != nil {
		batch = c.Batch.ID
	}
	lo := s.seq + 1
	// The previous job's class: a submit's jobs mostly share it, so most
	// jobs need no lookup.
	var cls *class
	n := len(c.Jobs)
	if order != nil {
		n = len(order)
	}
	for k := 0; k < n; k++ {
		i := k
		if order != nil {
			i = order[k]
		}
		nj := &c.Jobs[i]
		if rf := nj.validate(); rf != nil {
			r.subs[i] = sub{outcome: OutcomeRejected, code: rf.code, detail: rf.detail}
			continue
		}
		if nj.IdempotencyKey != "" {
			if ke, ok := s.keys.Get(keyEnt{key: nj.IdempotencyKey}); ok {
				r.subs[i] = sub{outcome: OutcomeDuplicate, job: s.get(ke.id)}
				continue
			}
		}
		id := nj.ID
		if id == "" {
			id = s.newDerivedID(e.Index, i)
		}
		if old := s.get(id); old != nil {
			if !bugs.On("dedupe") {
				r.subs[i] = sub{outcome: OutcomeDuplicate, job: old}
				continue
			}
			id = s.newDerivedID(e.Index, i)
		}
		uq, holder := s.unique(nj, now) // unique.go
		if holder != nil {
			r.subs[i] = sub{outcome: OutcomeDuplicate, job: holder}
			continue
		}
		deps, rf := s.parentsOf(nj, batch)
		if rf != nil {
			r.subs[i] = sub{outcome: OutcomeRejected, code: rf.code, detail: rf.detail}
			continue
		}
		if k := keyOf(nj.Kind, nj.Backoff.withDefaults(), nj.MaxAttempts); cls == nil || cls.queue != nj.Queue || cls.classKey != k {
			cls = s.class(s.queueOrCreate(nj.Queue), k)
		}
		s.seq++
		j := newRecord(nj, id, s.seq, now, cls)
		j.setUniq(uq)
		if j.setDeps(deps); deps.waits() {
			j.state = StateWaiting
		} else {
			j.ready(now)
		}
		s.insert(j)
		members[j.state]++
		r.subs[i] = sub{outcome: OutcomeCreated, job: j}
	}
	for i, cyc := range cyclic {
		if cyc {
			r.subs[i] = sub{outcome: OutcomeRejected, code: CodeDependencyCycle, detail: "job " + strconv.Itoa(i) + " is on or depends on a cycle of parents in its submit"}
		}
	}
	if c.Batch != nil {
		s.newGroup(e, now, c, members, lo, s.seq)
	}
}

// newRecord is the record of a job submitted as nj with ID id, submit
// sequence seq, at log time now, of class cls (interned), before it is
// placed (ready, or waiting). Its payload is nj's (decoded from the entry:
// a copy nobody writes).
func newRecord(nj *NewJob, id string, seq uint64, now int64, cls *class) *job {
	return &job{
		id: id, cls: cls, key: nj.IdempotencyKey,
		payload: viewString(nj.Payload), runAt: toNanos(nj.RunAt), created: now, updated: now,
		seq: seq, prio: nj.Priority,
	}
}

// promote moves every scheduled job whose run-at is due (<= now) to its
// queue's ready order, queue by queue in name order.
func (s *state) promote(now int64) {
	// No scheduled job is due before promo.next (state.promo).
	if s.promo.ok && now < s.promo.next {
		return
	}
	next := int64(math.MaxInt64)
	var due []*job
	s.queues.Scan(func(q *queue) bool {
		q.sched.Scan(func(it item) bool {
			if it.a > now {
				next = min(next, it.a)
				return false
			}
			due = append(due, s.rec(it))
			return true
		})
		return true
	})
	for _, old := range due {
		n := old.clone()
		n.state = StatePending
		s.replace(old, n)
	}
	s.promo.ok, s.promo.next = true, next
}

func (s *state) claim(e Entry, now int64, c *ClaimCmd, r *result) *refusal {
	if c.ID != "" {
		if held := s.claimed(c.ID); len(held) > 0 {
			r.jobs = held // a repeat: its leases, nothing changes
			return nil
		}
	}
	r.changed = true
	qs := make([]*queue, 0, 4) // on the stack for most claims (a sized make; sources keep the queues)
	paused := 0
	for i, name := range c.Queues {
		dup := false
		for _, prev := range c.Queues[:i] {
			dup = dup || prev == name
		}
		if dup {
			continue
		}
		q := s.queue(name)
		switch {
		case q == nil:
		case q.paused:
			paused++
		default:
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 && paused > 0 {
		return refuse(CodeQueuePaused, "every queue claimed is paused")
	}
	s.promote(now)
	ttl := int64(c.TTL)
	src := s.readySources(qs, c.Kinds)
	defer src.reset()
	for len(r.jobs) < int(c.Max) {
		best := src.best(now)
		if best < 0 {
			src.countHeld(now)
			break
		}
		old := s.rec(src.heads[best])
		n := old.clone()
		n.state = StateRunning
		n.attempts++
		n.updated = now
		n.lease = &lease{token: e.Index, worker: c.Worker, deadline: addSat(now, ttl), ttl: ttl, term: e.Term, claim: c.ID}
		s.replace(old, n)
		src.pop(best)
		src.took(best, now)
		r.jobs = append(r.jobs, n)
	}
	return nil
}

// sources are the ready trees a claim takes from, with each one's best
// item cached: one tree per queue, or per (queue, kind) when the claim
// names kinds or the queue has kind limits (limit_claim.go). Items never
// tie (seq is unique), so the best across them is one job whatever the
// order of the trees.
type sources struct {
	trees []*tree
	heads []item
	ok    []bool
	lims  []limitSource
}

// readySources fills the state's scratch sources (apply goroutine only;
// reset them after use).
func (s *state) readySources(qs []*queue, kinds []string) *sources {
	src := &s.src
	for _, q := range qs {
		s.addQueue(src, q, kinds)
	}
	return src
}

// reset empties src, keeping its storage, and drops its references to
// trees.
func (src *sources) reset() {
	clear(src.trees)
	clear(src.heads)
	clear(src.lims)
	src.trees, src.heads, src.ok, src.lims = src.trees[:0], src.heads[:0], src.ok[:0], src.lims[:0]
}

// best returns the index of the tree holding the best item among those
// its limits do not block at now, -1 if there is none.
func (src *sources) best(now int64) int {
	b := -1
	for i := range src.trees {
		if src.ok[i] && (b < 0 || itemLess(src.heads[i], src.heads[b])) && src.blocked(i, now) == 0 {
			b = i
		}
	}
	return b
}

// pop refreshes tree i's head after its best job left the ready state
// (which removed it from tree i; no other source tree held it).
func (src *sources) pop(i int) { src.heads[i], src.ok[i] = src.trees[i].Min() }

func (s *state) extend(e Entry, now int64, c *ExtendCmd, r *result) *refusal {
	old, rf := s.leased(c.ID, c.Token)
	if rf != nil {
		return rf
	}
	ttl := int64(c.TTL)
	if ttl == 0 {
		ttl = old.lease.ttl
	}
	n := old.clone()
	n.updated = now
	n.lease = &lease{token: old.lease.token, worker: old.lease.worker, deadline: addSat(now, ttl), ttl: ttl, term: e.Term, claim: old.lease.claim}
	s.replace(old, n)
	r.jobs = append(r.jobs, n)
	return nil
}

func (s *state) ack(now int64, c *AckCmd, r *result) *refusal {
	return s.finish(c.ID, c.Token, now, StateSucceeded, EndAcked, 0, nil, c.Result, r)
}

// finish ends the leased job id (fenced by token) in terminal state st by
// kind by (with the request's sum, 0 for an ack) with the outcome (msg,
// result); a nil msg keeps the last error. A repeat of the request that
// ended the lease answers the job unchanged (ending).
func (s *state) finish(id string, token uint64, now int64, st State, by EndKind, sum uint64, msg *string, result []byte, r *result) *refusal {
	old, rf := s.ending(id, token, by, sum, result, r)
	if old == nil {
		return rf
	}
	n := old.clone()
	n.state = st
	n.lease = nil
	n.updated = now
	n.end = &leaseEnd{token: token, sum: sum, by: by}
	last := old.lastErr()
	if msg != nil {
		last = *msg
	}
	n.setOutcome(last, result)
	s.replace(old, n)
	r.jobs = append(r.jobs, n)
	return nil
}

// fail ends n's current attempt (n is a private copy, lease already
// cleared): dead when out of attempts, else scheduled after delay (0: the
// job's backoff for its attempt count).
func fail(n *job, now int64, delay time.Duration, msg string) {
	n.lease = nil
	n.updated = now
	n.setOutcome(msg, nil)
	if n.attempts >= n.cls.maxAtt {
		n.state = StateDead
		return
	}
	if delay == 0 {
		delay = n.cls.bo.Delay(n.id, n.attempts)
	}
	n.runAt = addSat(now, int64(delay))
	n.state = StateScheduled
}

func (s *state) nak(now int64, c *NakCmd, r *result) *refusal {
	sum := s.requestSum(EndNaked, c.Delay, c.Error)
	old, rf := s.ending(c.ID, c.Token, EndNaked, sum, nil, r)
	if old == nil {
		return rf
	}
	n := old.clone()
	n.end = &leaseEnd{token: c.Token, sum: sum, by: EndNaked}
	fail(n, now, c.Delay, c.Error)
	s.replace(old, n)
	r.jobs = append(r.jobs, n)
	return nil
}

func (s *state) term(now int64, c *TermCmd, r *result) *refusal {
	return s.finish(c.ID, c.Token, now, StateDead, EndTermed, s.requestSum(EndTermed, 0, c.Reason), &c.Reason, nil, r)
}

func (s *state) cancel(now int64, c *CancelCmd, r *result) *refusal {
	old := s.get(c.ID)
	if old == nil {
		return refuse(CodeNotFound, "job %q", c.ID)
	}
	if old.state.Terminal() {
		return refuse(CodeInvalidState, "cannot cancel %s job %q", old.state, c.ID)
	}
	n := old.clone()
	if old.lease != nil {
		n.end = &leaseEnd{token: old.lease.token, by: EndCanceled}
	}
	n.state = StateCanceled
	n.lease = nil
	n.updated = now
	n.setOutcome(c.Reason, nil)
	s.replace(old, n)
	r.jobs = append(r.jobs, n)
	return nil
}

func (s *state) retry(now int64, c *RetryCmd, r *result) *refusal {
	old := s.get(c.ID)
	if old == nil {
		return refuse(CodeNotFound, "job %q", c.ID)
	}
	if old.state != StateDead && old.state != StateCanceled {
		return refuse(CodeInvalidState, "cannot retry %s job %q", old.state, c.ID)
	}
	n := old.clone()
	n.state = StatePending
	n.attempts = 0
	n.runAt = now
	n.updated = now
	n.setOutcome(old.lastErr(), nil)
	if rf := s.recheck(n); rf != nil {
		return rf
	}
	s.replace(old, n)
	r.jobs = append(r.jobs, n)
	return nil
}

// expirable is the skew rule: a lease whose deadline passed (in log time
// now) may be expired by an entry of the same term (same leader, same
// clock); a lease from an earlier term only once the proposing leader has
// itself been in office for the lease's whole TTL (inOffice, see expire);
// never one from a later term.
func expirable(l *lease, now int64, term uint64, inOffice int64) bool {
	if l.deadline > now {
		return false
	}
	if l.term == term {
		return true
	}
	return l.term < term && inOffice >= l.ttl
}

// inOffice is how long the leader proposing an expire has been in office,
// by two measures of which it takes the smaller: log time since the term's
// first entry (clock.go: it never runs faster than the leader's clock), and
// the entry's stamp since the leader's LeaderSince (both its own clock, so
// a clock stepped back only shortens it). Negative: not yet.
func inOffice(now, office, stamp, leaderSince int64) int64 {
	return min(subSat(now, office), subSat(stamp, leaderSince))
}

// subSat is a - b, saturated to the int64 range.
func subSat(a, b int64) int64 {
	if b == -1<<63 {
		if a >= 0 {
			return 1<<63 - 1
		}
		return a - b
	}
	return addSat(a, -b)
}

func (s *state) expire(e Entry, now int64, c *ExpireCmd, r *result) {
	s.promote(now)
	since := inOffice(now, s.clock.office, toNanos(e.Time), toNanos(c.LeaderSince))
	var due []*job
	s.queues.Scan(func(q *queue) bool {
		q.running.Scan(func(it item) bool {
			if it.a > now {
				return false
			}
			if j := s.rec(it); expirable(j.lease, now, e.Term, since) {
				due = append(due, j)
			}
			return true
		})
		return true
	})
	for _, old := range due {
		n := old.clone()
		n.end = &leaseEnd{token: old.lease.token, by: EndExpired}
		fail(n, now, 0, leaseExpiredMsg)
		s.replace(old, n)
		r.expired = append(r.expired, n.id)
	}
}

func (s *state) sweep(now int64, c *SweepCmd, r *result) {
	var qs []*queue
	s.queues.Scan(func(q *queue) bool {
		qs = append(qs, q)
		return true
	})
	cutoff := addSat(now, -int64(c.MaxAge))
	for _, q := range qs {
		var gone []*job
		keep := q.done.Len()
		q.done.Scan(func(it item) bool {
			switch {
			case c.MaxAge > 0 && it.a <= cutoff:
			case c.MaxPerQueue > 0 && keep > int(c.MaxPerQueue):
			default:
				return false
			}
			gone = append(gone, s.rec(it))
			keep--
			return true
		})
		for _, j := range gone {
			s.remove(j)
		}
		r.removed += uint64(len(gone))
	}
	if c.MaxAge > 0 {
		s.sweepGroups(cutoff)
	}
}
