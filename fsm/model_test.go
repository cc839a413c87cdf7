package fsm

import (
	"slices"
	"sort"
	"time"
)

// model is the naive reference for the differential test: plain maps of
// public Job values, sorting slices on every query. It is written to be
// obviously right, not fast. Input validation (validate, NewJob.validate)
// and Backoff.Delay are shared with the real thing; all state logic is not.
type model struct {
	index, seq uint64
	jobs       map[string]*Job
	keys       map[string]string
	paused     map[string]bool
	ends       map[string]modelEnd // per job, the request that ended its last lease
	clk        modelClock
	groups     map[string]*modelGroup // batches (deps_model_test.go)
	scheds     map[string]*Schedule   // schedule_model_test.go
	limits     map[string]*modelLimit // limit_model_test.go
}

// modelEnd is what ended a job's last lease: the kind, the token and, for
// an ack, nak or term, the request as it was sent.
type modelEnd struct {
	by     EndKind
	token  uint64
	result string        // ack
	delay  time.Duration // nak
	msg    string        // nak error, term reason
}

// lastLease is the job's LastLease for e.
func (e modelEnd) lastLease() *LeaseEnd {
	l := &LeaseEnd{Token: e.token, By: e.by}
	switch e.by {
	case EndNaked:
		l.Sum = NakCmd{Delay: e.delay, Error: e.msg}.Sum()
	case EndTermed:
		l.Sum = TermCmd{Reason: e.msg}.Sum()
	}
	return l
}

// end records e as how job j's last lease ended.
func (m *model) end(j *Job, e modelEnd) {
	m.ends[j.ID] = e
	j.LastLease = e.lastLease()
}

// modelClock is the reference log clock: within a term, log time is the
// term's start plus how far the leader's highest stamp so far is past its
// first; a term starts at its first stamp, or just after the log time if
// that is later.
type modelClock struct {
	term           uint64 // 0: no entry yet
	last           int64  // log time of the last entry
	office         int64  // log time at the term's first entry
	first, highest int64  // the term's first and highest stamps
}

func (c *modelClock) entry(term uint64, stamp int64) int64 {
	if c.term == 0 || term != c.term {
		if c.term == 0 || stamp > c.last {
			c.last = stamp
		} else {
			c.last = addSat(c.last, 1)
		}
		c.term, c.office, c.first, c.highest = term, c.last, stamp, stamp
		return c.last
	}
	if stamp > c.highest {
		c.highest = stamp
	}
	c.last = addSat(c.office, c.highest-c.first)
	return c.last
}

// at: the log time an entry stamped now in the current term would get.
func (c modelClock) at(now time.Time) time.Time {
	if c.term == 0 {
		return now
	}
	return fromNanos(c.entry(c.term, toNanos(now)))
}

func newModel() *model {
	return &model{jobs: map[string]*Job{}, keys: map[string]string{}, paused: map[string]bool{}, ends: map[string]modelEnd{}, groups: map[string]*modelGroup{},
		limits: map[string]*modelLimit{}}
}

func (m *model) clone() *model {
	c := &model{index: m.index, seq: m.seq, clk: m.clk, jobs: map[string]*Job{}, keys: map[string]string{}, paused: map[string]bool{}, limits: map[string]*modelLimit{}}
	for q, l := range m.limits {
		c.limits[q] = l.clone()
	}
	for id, j := range m.jobs {
		cp := *j
		c.jobs[id] = &cp
	}
	for k, v := range m.keys {
		c.keys[k] = v
	}
	for k, v := range m.paused {
		c.paused[k] = v
	}
	c.groups = map[string]*modelGroup{}
	for k, g := range m.groups {
		cp := *g
		c.groups[k] = &cp
	}
	c.scheds = cloneScheds(m.scheds)
	return c
}

func noPayload(j *Job) Job {
	c := *j
	c.Payload = nil
	return c
}

func withPayload(j *Job) Job { return *j }

// sortKey is the order of a state's index (see item in state.go).
func sortKey(j *Job) [3]int64 {
	switch j.State {
	case StatePending:
		return [3]int64{-int64(j.Priority), toNanos(j.RunAt), int64(j.Seq)}
	case StateScheduled:
		return [3]int64{toNanos(j.RunAt), 0, int64(j.Seq)}
	case StateRunning:
		return [3]int64{toNanos(j.Lease.Deadline), 0, int64(j.Seq)}
	case StateWaiting:
		return [3]int64{toNanos(j.Created), 0, int64(j.Seq)}
	}
	return [3]int64{toNanos(j.Updated), 0, int64(j.Seq)}
}

func lessKey(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (m *model) queueNames() []string {
	set := map[string]bool{}
	for _, j := range m.jobs {
		set[j.Queue] = true
	}
	for q, p := range m.paused {
		if p {
			set[q] = true
		}
	}
	var names []string
	for q := range set {
		names = append(names, q)
	}
	sort.Strings(names)
	return names
}

// selectJobs returns the jobs of queue q in state s in index order.
func (m *model) selectJobs(q string, s State) []*Job {
	var out []*Job
	for _, j := range m.jobs {
		if j.Queue == q && j.State == s {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return lessKey(sortKey(out[a]), sortKey(out[b])) })
	return out
}

func (m *model) counts(q string) Counts {
	var c Counts
	for _, j := range m.jobs {
		if j.Queue != q {
			continue
		}
		switch j.State {
		case StatePending:
			c.Pending++
		case StateScheduled:
			c.Scheduled++
		case StateRunning:
			c.Running++
		case StateSucceeded:
			c.Succeeded++
		case StateDead:
			c.Dead++
		case StateCanceled:
			c.Canceled++
		case StateWaiting:
			c.Waiting++
		}
	}
	return c
}

// kinds is QueueInfo.Kinds by brute force: per kind of q's pending and
// scheduled jobs, in name order, their counts and the earliest run-at of
// the scheduled ones.
func (m *model) kinds(q string) []KindInfo {
	by := map[string]*KindInfo{}
	var names []string
	for _, j := range m.jobs {
		if j.Queue != q || (j.State != StatePending && j.State != StateScheduled) {
			continue
		}
		k := by[j.Kind]
		if k == nil {
			k = &KindInfo{Kind: j.Kind}
			by[j.Kind] = k
			names = append(names, j.Kind)
		}
		if j.State == StatePending {
			k.Pending++
		} else if k.Scheduled++; k.NextRunAt.IsZero() || j.RunAt.Before(k.NextRunAt) {
			k.NextRunAt = j.RunAt
		}
	}
	sort.Strings(names)
	var out []KindInfo
	for _, n := range names {
		out = append(out, *by[n])
	}
	return out
}

// claimable is Jobs.Claimable by brute force: a job of one of kinds (or
// any kind) in a named queue that is not paused, pending or due.
func (m *model) claimable(queues, kinds []string, now time.Time) bool {
	now = m.clk.at(now)
	for _, j := range m.jobs {
		if !slices.Contains(queues, j.Queue) || m.paused[j.Queue] || (len(kinds) > 0 && !slices.Contains(kinds, j.Kind)) {
			continue
		}
		if (j.State == StatePending || (j.State == StateScheduled && !j.RunAt.After(now))) && m.blockedBy(j, toNanos(now)) == 0 {
			return true
		}
	}
	return false
}

func (m *model) promote(now time.Time) {
	for _, j := range m.jobs {
		if j.State == StateScheduled && !j.RunAt.After(now) {
			j.State = StatePending
		}
	}
}

func (m *model) fail(j *Job, now time.Time, delay time.Duration, msg string) {
	j.Lease = nil
	j.Updated = now
	j.LastError = msg
	j.Result = nil
	if j.Attempts >= j.MaxAttempts {
		j.State = StateDead
		j.Finished = now
		return
	}
	if delay == 0 {
		delay = j.Backoff.Delay(j.ID, j.Attempts)
	}
	j.RunAt = fromNanos(addSat(toNanos(now), int64(delay)))
	j.State = StateScheduled
}

func (m *model) apply(e Entry) Result {
	r := Result{Index: e.Index}
	if len(e.Cmd) >= 2 && CommandType(e.Cmd[1]) < numCmds {
		r.Command = CommandType(e.Cmd[1])
	}
	m.index = e.Index
	return m.applyAt(e, r, m.clk.entry(e.Term, toNanos(e.Time)))
}

// applyAt applies e's command at log time nowNs, then what it moved
// through dependencies and batches (deps_model_test.go), then frees the
// unique keys of the jobs it moved out of their chosen states (the jobs
// it answers show them freed).
func (m *model) applyAt(e Entry, r Result, nowNs int64) Result {
	before := m.states()
	r = m.applyCmd(e, r, nowNs)
	if r.Code == CodeOK && r.Command != CmdBatch {
		m.settle(before, &r, nowNs)
	}
	m.releaseKeys()
	for i := range r.Jobs {
		if j, ok := m.jobs[r.Jobs[i].ID]; ok {
			r.Jobs[i].Unique = j.Unique
		}
	}
	for i := range r.Cascade {
		if j, ok := m.jobs[r.Cascade[i].Job.ID]; ok {
			r.Cascade[i].Job.Unique = j.Unique
		}
	}
	return r
}

// applyCmd applies e's command at log time nowNs.
func (m *model) applyCmd(e Entry, r Result, nowNs int64) Result {
	c, err := DecodeCommand(e.Cmd)
	if err != nil {
		r.Code = codeOf(err)
		return r
	}
	if rf := validate(c, false); rf != nil {
		r.Code = rf.code
		return r
	}
	if b, ok := c.(*BatchCmd); ok {
		// The reference: each command applied as if alone, at the same
		// index.
		for _, x := range b.Cmds {
			sub := Entry{Index: e.Index, Term: e.Term, Time: e.Time, Cmd: appendCommand(nil, x)}
			r.Batch = append(r.Batch, m.applyAt(sub, Result{Index: e.Index, Command: x.Type()}, nowNs))
		}
		return r
	}
	now := fromNanos(nowNs)
	leased := func(id string, tok uint64) (*Job, Code) {
		j, ok := m.jobs[id]
		if !ok {
			return nil, CodeNotFound
		}
		if j.State != StateRunning || j.Lease.Token != tok {
			return nil, CodeStaleLease
		}
		return j, CodeOK
	}
	// finishing is leased for ack, nak and term: a repeat of the very
	// request that ended the job's last lease (as sent: same kind, token,
	// result, delay, message) answers the job, changing nothing.
	finishing := func(id string, req modelEnd) (*Job, Code) {
		j, code := leased(id, req.token)
		if code == CodeOK {
			r.Changed = true
			m.end(j, req)
			return j, code
		}
		if old, ok := m.jobs[id]; ok && old.LastLease != nil && m.ends[id] == req {
			r.Jobs = []Job{noPayload(old)}
			return nil, CodeOK
		}
		return nil, code
	}
	switch c := c.(type) {
	case *SubmitCmd:
		m.submit(e, c, &r, now)
	case *ClaimCmd:
		if c.ID != "" {
			var held []string
			for id, j := range m.jobs {
				if j.State == StateRunning && j.Lease.ClaimID == c.ID {
					held = append(held, id)
				}
			}
			if len(held) > 0 {
				sort.Strings(held)
				for _, id := range held {
					r.Jobs = append(r.Jobs, withPayload(m.jobs[id]))
				}
				return r
			}
		}
		exists := map[string]bool{}
		for _, q := range m.queueNames() {
			exists[q] = true
		}
		eligible, paused := map[string]bool{}, 0
		for _, q := range slicesCompact(c.Queues) {
			switch {
			case !exists[q]:
			case m.paused[q]:
				paused++
			default:
				eligible[q] = true
			}
		}
		if len(eligible) == 0 && paused > 0 {
			r.Code = CodeQueuePaused
			return r
		}
		r.Changed = true
		m.promote(now)
		var cands []*Job
		for _, j := range m.jobs {
			if eligible[j.Queue] && j.State == StatePending && (len(c.Kinds) == 0 || slices.Contains(c.Kinds, j.Kind)) {
				cands = append(cands, j)
			}
		}
		sort.Slice(cands, func(a, b int) bool { return lessKey(sortKey(cands[a]), sortKey(cands[b])) })
		r.Jobs = []Job{}
		m.leaseFrom(cands, int(c.Max), nowNs, func(j *Job) {
			j.State = StateRunning
			j.Attempts++
			j.Updated = now
			j.Lease = &Lease{Token: e.Index, Worker: c.Worker, Deadline: fromNanos(addSat(nowNs, int64(c.TTL))), TTL: c.TTL, Term: e.Term, ClaimID: c.ID}
			r.Jobs = append(r.Jobs, withPayload(j))
		})
	case *ExtendCmd:
		j, code := leased(c.ID, c.Token)
		if code != CodeOK {
			r.Code = code
			return r
		}
		ttl := c.TTL
		if ttl == 0 {
			ttl = j.Lease.TTL
		}
		j.Updated = now
		j.Lease = &Lease{Token: j.Lease.Token, Worker: j.Lease.Worker, Deadline: fromNanos(addSat(nowNs, int64(ttl))), TTL: ttl, Term: e.Term, ClaimID: j.Lease.ClaimID}
		r.Jobs = []Job{noPayload(j)}
	case *AckCmd:
		j, code := finishing(c.ID, modelEnd{by: EndAcked, token: c.Token, result: string(c.Result)})
		if j == nil {
			r.Code = code
			return r
		}
		j.State, j.Lease, j.Updated, j.Finished = StateSucceeded, nil, now, now
		j.Result = c.Result
		r.Jobs = []Job{noPayload(j)}
	case *NakCmd:
		j, code := finishing(c.ID, modelEnd{by: EndNaked, token: c.Token, delay: c.Delay, msg: c.Error})
		if j == nil {
			r.Code = code
			return r
		}
		m.fail(j, now, c.Delay, c.Error)
		r.Jobs = []Job{noPayload(j)}
	case *TermCmd:
		j, code := finishing(c.ID, modelEnd{by: EndTermed, token: c.Token, msg: c.Reason})
		if j == nil {
			r.Code = code
			return r
		}
		j.State, j.Lease, j.Updated, j.Finished = StateDead, nil, now, now
		j.LastError, j.Result = c.Reason, nil
		r.Jobs = []Job{noPayload(j)}
	case *CancelCmd:
		j, ok := m.jobs[c.ID]
		if !ok {
			r.Code = CodeNotFound
			return r
		}
		if j.State.Terminal() {
			r.Code = CodeInvalidState
			return r
		}
		if j.Lease != nil {
			m.end(j, modelEnd{by: EndCanceled, token: j.Lease.Token})
		}
		j.State, j.Lease, j.Updated, j.Finished = StateCanceled, nil, now, now
		j.LastError, j.Result = c.Reason, nil
		r.Jobs = []Job{noPayload(j)}
	case *RetryCmd:
		j, ok := m.jobs[c.ID]
		if !ok {
			r.Code = CodeNotFound
			return r
		}
		if j.State != StateDead && j.State != StateCanceled {
			r.Code = CodeInvalidState
			return r
		}
		unmet, code := m.recheck(j)
		if code != CodeOK {
			r.Code = code
			return r
		}
		j.State, j.Attempts, j.RunAt, j.Updated, j.Finished, j.Result = StatePending, 0, now, now, time.Time{}, nil
		m.wait(j, unmet)
		r.Jobs = []Job{noPayload(j)}
	case *ExpireCmd:
		if c.Term != 0 && c.Term != e.Term {
			r.Code = CodeInvalidState // proposed for another term
			return r
		}
		m.promote(now)
		// In office for a TTL: by log time since the term's first entry,
		// and by the leader's stamps since its LeaderSince.
		office, stamp, since := m.clk.office, toNanos(e.Time), toNanos(c.LeaderSince)
		served := func(ttl time.Duration) bool {
			return nowNs >= office && uint64(nowNs)-uint64(office) >= uint64(ttl) &&
				stamp >= since && uint64(stamp)-uint64(since) >= uint64(ttl)
		}
		var due []*Job
		for _, j := range m.jobs {
			if j.State != StateRunning || j.Lease.Deadline.After(now) {
				continue
			}
			l := j.Lease
			ok := l.Term == e.Term ||
				(l.Term < e.Term && served(l.TTL))
			if ok {
				due = append(due, j)
			}
		}
		sort.Slice(due, func(a, b int) bool {
			if due[a].Queue != due[b].Queue {
				return due[a].Queue < due[b].Queue
			}
			return lessKey(sortKey(due[a]), sortKey(due[b]))
		})
		for _, j := range due {
			m.end(j, modelEnd{by: EndExpired, token: j.Lease.Token})
			m.fail(j, now, 0, leaseExpiredMsg)
			r.Expired = append(r.Expired, j.ID)
		}
	case *SetLimitCmd, *ClearLimitCmd, *SetRateCmd, *ClearRateCmd:
		r.Changed = m.applyLimit(c)
	case *PauseCmd:
		r.Changed = !m.paused[c.Queue]
		m.paused[c.Queue] = true
	case *ResumeCmd:
		r.Changed = m.paused[c.Queue]
		delete(m.paused, c.Queue)
	case *ScheduleCmd, *ScheduleSetCmd, *FireCmd:
		m.schedule(c, nowNs, &r)
	case *SweepCmd:
		m.sweepGroups(c, nowNs)
		for _, q := range m.queueNames() {
			var done []*Job
			for _, j := range m.jobs {
				if j.Queue == q && j.State.Terminal() {
					done = append(done, j)
				}
			}
			sort.Slice(done, func(a, b int) bool { return lessKey(sortKey(done[a]), sortKey(done[b])) })
			keep := len(done)
			for _, j := range done {
				old := c.MaxAge > 0 && nowNs-toNanos(j.Updated) >= int64(c.MaxAge)
				over := c.MaxPerQueue > 0 && keep > int(c.MaxPerQueue)
				if !old && !over {
					break
				}
				keep--
				delete(m.jobs, j.ID)
				delete(m.ends, j.ID)
				if j.IdempotencyKey != "" {
					delete(m.keys, j.IdempotencyKey)
				}
				r.Removed++
			}
		}
	}
	return r
}

func slicesCompact(qs []string) []string {
	var out []string
	for _, q := range qs {
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}
