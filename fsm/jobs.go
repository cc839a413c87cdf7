package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Jobs is the job state machine. The zero value is not usable; call New.
//
// Apply, Snapshot and Restore must be called from one goroutine (the
// node's apply loop). Every query method (Get, List, Queue, Queues,
// AppliedIndex, Digest, Claimable, Sweepable) may be called from any goroutine concurrently with
// them: a RWMutex serialises them against Apply, and each query sees the
// state after some whole entry.
type Jobs struct {
	mu sync.RWMutex
	st *state
	// Scratch of the goroutine calling Apply, reused across entries and
	// cleared after each: a submit's decoded jobs and its result's
	// per-job answers (neither outlives the entry).
	newJobs []NewJob
	subs    []sub
}

// maxScratch bounds the jobs a submit's reused scratch keeps room for.
const maxScratch = 1024

// New returns an empty job state machine.
func New() *Jobs { return &Jobs{st: newState()} }

// Apply applies one committed command (raft.StateMachine's Apply, through
// the controller). It decodes e.Cmd, applies it and returns
// an encoded Result (DecodeResult). It never panics on input; a refused
// command changes nothing but the applied index.
func (m *Jobs) Apply(e Entry) []byte {
	c, err := decodeCommand(e.Cmd, m.newJobs)
	m.mu.Lock()
	m.st.subs = m.subs
	r := m.st.apply(e, c, err)
	m.mu.Unlock()
	// Records referenced by r are immutable: encode outside the lock.
	out := appendResult(make([]byte, 0, resultSizeHint(r)), r)
	if sc, ok := c.(*SubmitCmd); ok {
		m.keepScratch(sc.Jobs, r.subs)
	}
	return out
}

// keepScratch clears a submit's decoded jobs and answers (they reference
// payloads and records) and keeps their storage for the next submit when
// not larger than maxScratch.
func (m *Jobs) keepScratch(jobs []NewJob, subs []sub) {
	clear(jobs)
	clear(subs)
	if cap(jobs) <= maxScratch && cap(jobs) > cap(m.newJobs) {
		m.newJobs = jobs[:0]
	}
	if cap(subs) <= maxScratch && cap(subs) > cap(m.subs) {
		m.subs = subs[:0]
	}
	m.st.subs = nil
}

// resultSizeHint is the length appendResult(nil, r) returns (exact for
// every command but a batch, where it is at most 4 bytes per command
// above): Apply encodes into one buffer that never grows.
func resultSizeHint(r *result) int {
	str := func(n int) int { return uvarintLen(uint64(n)) + n }
	n := 3 + uvarintLen(r.index) + str(len(r.detail))
	if r.code != CodeOK {
		return n
	}
	n += resultDepsSize(r)
	switch r.cmd {
	case CmdSubmit:
		n += uvarintLen(uint64(len(r.subs)))
		for _, s := range r.subs {
			n += 2 + str(len(s.detail))
			if s.job != nil {
				n += jobSize(s.job, false)
			}
		}
	case CmdClaim, CmdExtend, CmdAck, CmdNak, CmdTerm, CmdCancel, CmdRetry:
		n += uvarintLen(uint64(len(r.jobs))) + 1
		for _, j := range r.jobs {
			n += jobSize(j, r.cmd == CmdClaim)
		}
	case CmdExpire:
		n += uvarintLen(uint64(len(r.expired)))
		for _, id := range r.expired {
			n += str(len(id))
		}
	case CmdSweep:
		n += uvarintLen(r.removed)
	case CmdPause, CmdResume, CmdSetLimit, CmdClearLimit, CmdSetRate, CmdClearRate:
		n++
	case CmdSchedule, CmdScheduleSet, CmdFire:
		n += scheduleResultSize(r)
	case CmdBatch:
		n += uvarintLen(uint64(len(r.batch)))
		for _, sr := range r.batch {
			n += binary.MaxVarintLen32 + resultSizeHint(sr)
		}
	}
	return n
}

// AppliedIndex returns the index of the last applied entry.
func (m *Jobs) AppliedIndex() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.index
}

// Digest summarises the state as of the last applied entry: see doc.go for what it covers. It costs
// one SHA-256 over a few hundred bytes, whatever the number of jobs.
func (m *Jobs) Digest() Digest {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return Digest{Index: m.st.index, Sum: m.st.sum()}
}

// AppliedTime returns the log time of the last applied entry (zero before
// the first): the time job records changed by it show.
func (m *Jobs) AppliedTime() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fromNanos(m.st.clock.now)
}

// LogTime translates a reading of the current leader's clock into the log's
// time, the time Apply uses (fsm.Entry.Time is only the leader's stamp; see
// doc.go): the time an entry the leader stamps now would apply at. Job
// times (RunAt, Lease.Deadline, Updated, ...) are log times. On a follower,
// whose clock is not the leader's, the answer is off by the clocks' offset.
func (m *Jobs) LogTime(now time.Time) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fromNanos(m.st.clock.at(toNanos(now)))
}

// Get returns the job with the given ID, payload included: its slices
// are copies, the caller's to keep and write.
func (m *Jobs) Get(id string) (Job, bool) { return m.get(id, true) }

// Head is Get without the payload (nil): for a caller that reads the
// job's other fields, it copies no payload (up to MaxPayload bytes).
func (m *Jobs) Head(id string) (Job, bool) { return m.get(id, false) }

func (m *Jobs) get(id string, withPayload bool) (Job, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	j := m.st.getShared(id)
	if j == nil {
		return Job{}, false
	}
	return j.owned(withPayload), true
}

// Len returns the number of jobs held (all states).
func (m *Jobs) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.jobs.Len()
}

// Counts is the number of jobs of a queue in each state.
type Counts struct {
	Pending, Scheduled, Running, Succeeded, Dead, Canceled int
	Waiting                                                int // waiting for parents (deps.go)
}

// Of returns the count for state s.
func (c Counts) Of(s State) int {
	switch s {
	case StatePending:
		return c.Pending
	case StateScheduled:
		return c.Scheduled
	case StateRunning:
		return c.Running
	case StateSucceeded:
		return c.Succeeded
	case StateDead:
		return c.Dead
	case StateCanceled:
		return c.Canceled
	case StateWaiting:
		return c.Waiting
	}
	return 0
}

// QueueInfo describes one queue. A queue exists while it holds a job or is
// paused.
type QueueInfo struct {
	Name   string
	Paused bool
	Counts Counts
	// Kinds are the kinds of the queue's pending and scheduled jobs, in
	// name order: what is waiting for a worker, by kind.
	Kinds []KindInfo
}

// KindInfo counts one kind's pending and scheduled jobs in a queue.
type KindInfo struct {
	Kind               string
	Pending, Scheduled int
	// NextRunAt is the earliest run-at of its scheduled jobs (zero when
	// none): a scheduled job stays scheduled until claimed, so one whose
	// time has come waits as a pending one does.
	NextRunAt time.Time
}

func (q *queue) info() QueueInfo {
	c := q.counts
	info := QueueInfo{Name: q.name, Paused: q.paused, Counts: Counts{
		Pending: c[StatePending], Scheduled: c[StateScheduled], Running: c[StateRunning],
		Succeeded: c[StateSucceeded], Dead: c[StateDead], Canceled: c[StateCanceled],
		Waiting: c[StateWaiting],
	}}
	if len(q.byKind) > 0 {
		info.Kinds = make([]KindInfo, 0, len(q.byKind))
		for kind := range q.byKind {
			k := KindInfo{Kind: kind}
			if t := q.kindTree(kind, StatePending); t != nil {
				k.Pending = t.Len()
			}
			if t := q.kindTree(kind, StateScheduled); t != nil {
				k.Scheduled = t.Len()
				if it, ok := t.Min(); ok {
					k.NextRunAt = fromNanos(it.a)
				}
			}
			info.Kinds = append(info.Kinds, k)
		}
		slices.SortFunc(info.Kinds, func(a, b KindInfo) int { return strings.Compare(a.Kind, b.Kind) })
	}
	return info
}

// Queue returns one queue's state and counts.
func (m *Jobs) Queue(name string) (QueueInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q, ok := m.st.queues.Get(&queue{name: name})
	if !ok {
		return QueueInfo{}, false
	}
	return q.info(), true
}

// Queues returns every queue in name order.
func (m *Jobs) Queues() []QueueInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []QueueInfo
	m.st.queues.Scan(func(q *queue) bool {
		out = append(out, q.info())
		return true
	})
	return out
}

// Claimable reports whether a claim of queues limited to kinds (none: any
// kind), stamped now by the current leader (translated into the log's time
// as LogTime does), would lease a job: whether one of the
// queues that is not paused holds a pending job, or a scheduled one due by
// now, of one of the kinds, that its limits (limit.go) let a claim lease. It reads this instance's state as it is: on a
// member that is behind, an answer of the past. O(queues × kinds × log n).
func (m *Jobs) Claimable(queues, kinds []string, now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.st.clock.at(toNanos(now))
	due := func(tr *tree) bool {
		if tr == nil {
			return false
		}
		it, ok := tr.Min()
		return ok && it.a <= t
	}
	for _, name := range queues {
		q, ok := m.st.queues.Get(&queue{name: name})
		if !ok || q.paused {
			continue
		}
		l := m.st.limitOf(name) // limit_claim.go
		if l.blocksQueue(q, t) {
			continue
		}
		ks := l.claimKinds(q, kinds)
		if len(ks) == 0 {
			if q.ready.Len() > 0 || due(q.sched) {
				return true
			}
			continue
		}
		for _, k := range ks {
			if l.blocksKind(k) {
				continue
			}
			if r := q.kindTree(k, StatePending); (r != nil && r.Len() > 0) || due(q.kindTree(k, StateScheduled)) {
				return true
			}
		}
	}
	return false
}

// LeaseDue reports whether some running job's lease deadline is at or
// before now, a reading of the leader's clock translated into the log's
// time as LogTime does (an ExpireCmd may then have work). O(queues), no
// allocation.
func (m *Jobs) LeaseDue(now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.st.clock.at(toNanos(now))
	due := false
	m.st.queues.Scan(func(q *queue) bool {
		it, ok := q.running.Min()
		due = ok && it.a <= t
		return !due
	})
	return due
}

// Sweepable reports whether SweepCmd{maxAge, maxPerQueue} applied at time
// now would remove a job: a terminal job finished at least maxAge before
// now (maxAge > 0), or a queue with more than maxPerQueue terminal jobs
// (maxPerQueue > 0). now is a reading of the leader's clock, translated into
// the log's time as LogTime does. O(queues).
func (m *Jobs) Sweepable(maxAge time.Duration, maxPerQueue uint32, now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	cutoff := addSat(m.st.clock.at(toNanos(now)), -int64(maxAge))
	found := false
	m.st.queues.Scan(func(q *queue) bool {
		it, ok := q.done.Min()
		found = ok && ((maxAge > 0 && it.a <= cutoff) || (maxPerQueue > 0 && q.done.Len() > int(maxPerQueue)))
		return !found
	})
	return found
}

// Page limits for List.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListQuery selects jobs of one queue in one state, a page at a time.
type ListQuery struct {
	Queue string
	State State
	// Cursor is the Next of the previous page; empty for the first page.
	Cursor string
	// Limit is the page size (0: DefaultListLimit; capped at MaxListLimit).
	Limit int
}

// ListPage is one page of List. Next is empty on the last page.
type ListPage struct {
	Jobs []Job
	Next string
}

// List returns jobs of q.Queue in q.State, payload included, in the order
// of that state's index: pending in claim order (priority desc, run-at,
// submit sequence); scheduled by run-at; running by lease deadline;
// succeeded, dead and canceled by finish time (each then by submit
// sequence). Pages are stable under concurrent applies: a cursor resumes
// strictly after the last job returned in that order. The jobs' slices
// are copies, the caller's to keep and write.
func (m *Jobs) List(q ListQuery) (ListPage, error) {
	if !q.State.Valid() {
		return ListPage{}, fmt.Errorf("%w: list state %d", ErrInvalidCommand, q.State)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var c cursor
	after := false
	if q.Cursor != "" {
		var err error
		if c, err = parseCursor(q.Cursor); err != nil {
			return ListPage{}, err
		}
		after = true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var page ListPage
	qu, ok := m.st.queues.Get(&queue{name: q.Queue})
	if !ok {
		return page, nil
	}
	var last item
	more := false
	visit := func(it item) bool {
		if after && !c.before(it, q.State) {
			return true
		}
		j := m.st.rec(it)
		if j.state != q.State {
			return true
		}
		if len(page.Jobs) == limit {
			more = true
			return false
		}
		page.Jobs = append(page.Jobs, j.owned(true))
		last = it
		return true
	}
	if after {
		qu.tree(q.State).Ascend(c.pivot(q.State), visit)
	} else {
		qu.tree(q.State).Scan(visit)
	}
	if more {
		page.Next = formatCursor(last, q.State)
	}
	return page, nil
}

// cursor is a List cursor, "a.b.seq": an item's key as three numbers,
// (-priority, run-at, seq) for a pending job, (its index's time, 0, seq)
// for the others. The format predates the item's layout (item): cursors
// given out stay valid.
type cursor struct {
	a, b int64
	seq  uint64
}

// cursorOf is the cursor of it, an item of state s's index.
func cursorOf(it item, s State) cursor {
	if s == StatePending {
		return cursor{a: -int64(^it.p), b: it.a, seq: it.seq}
	}
	return cursor{a: it.a, seq: it.seq}
}

// before reports whether c comes before it, an item of state s's index.
func (c cursor) before(it item, s State) bool {
	k := cursorOf(it, s)
	if c.a != k.a {
		return c.a < k.a
	}
	if c.b != k.b {
		return c.b < k.b
	}
	return c.seq < k.seq
}

// pivot is an item of state s's index at or before the first item c
// comes before: where a page after c starts looking.
func (c cursor) pivot(s State) item {
	switch {
	case s != StatePending:
		return item{a: c.a} // every item with a below c.a is before c
	case c.a < -math.MaxInt32: // priority above any
		return item{p: math.MinInt32, a: math.MinInt64}
	case c.a > -math.MinInt32: // priority below any
		return item{p: math.MaxInt32, a: math.MaxInt64, seq: math.MaxUint64}
	}
	return item{p: ^int32(-c.a), a: c.b, seq: c.seq}
}

func formatCursor(it item, s State) string {
	c := cursorOf(it, s)
	return strconv.FormatInt(c.a, 10) + "." + strconv.FormatInt(c.b, 10) + "." + strconv.FormatUint(c.seq, 10)
}

func parseCursor(s string) (cursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	a, err1 := strconv.ParseInt(parts[0], 10, 64)
	b, err2 := strconv.ParseInt(parts[1], 10, 64)
	seq, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	return cursor{a: a, b: b, seq: seq}, nil
}
