package fsm

import (
	"bytes"
	"crypto/sha256"
	"sort"
	"time"

	"pgregory.net/rapid"
)

// The reference model's limits and unique keys (model_test.go): brute
// force over the model's jobs, written apart from limit.go and unique.go.

type modelLimit struct {
	max                  uint32
	kinds                map[string]uint32
	every                time.Duration
	burst                uint32
	full                 int64
	limited, rateLimited uint64
}

func (l *modelLimit) clone() *modelLimit {
	c := *l
	c.kinds = map[string]uint32{}
	for k, v := range l.kinds {
		c.kinds[k] = v
	}
	return &c
}

func (l *modelLimit) none() bool { return l.max == 0 && len(l.kinds) == 0 && l.every == 0 }

// tokens: a full bucket, less one token for every started interval
// between now and when it is full again.
func (l *modelLimit) tokens(now int64) uint32 {
	if l.full <= now {
		return l.burst
	}
	missing := (l.full - now + int64(l.every) - 1) / int64(l.every)
	if missing >= int64(l.burst) {
		return 0
	}
	return l.burst - uint32(missing)
}

// running counts the model's running jobs of queue q (of kind, when not
// empty).
func (m *model) running(q, kind string) int {
	n := 0
	for _, j := range m.jobs {
		if j.Queue == q && j.State == StateRunning && (kind == "" || j.Kind == kind) {
			n++
		}
	}
	return n
}

// blockedBy says what keeps j from being leased at now: 0 nothing, 1 a
// concurrency limit, 2 the rate.
func (m *model) blockedBy(j *Job, now int64) int {
	l := m.limits[j.Queue]
	switch {
	case l == nil:
		return 0
	case l.max > 0 && m.running(j.Queue, "") >= int(l.max):
		return 1
	case l.kinds[j.Kind] > 0 && m.running(j.Queue, j.Kind) >= int(l.kinds[j.Kind]):
		return 1
	case l.every > 0 && l.tokens(now) == 0:
		return 2
	}
	return 0
}

// leaseFrom takes cands (sorted, best first) in order while the claim has
// room, passing over those a limit blocks, then counts the claim held back
// per queue.
func (m *model) leaseFrom(cands []*Job, max int, now int64, lease func(j *Job)) int {
	n := 0
	for _, j := range cands {
		if n == max {
			break
		}
		if m.blockedBy(j, now) != 0 {
			continue
		}
		lease(j)
		if l := m.limits[j.Queue]; l != nil && l.every > 0 {
			if l.full < now {
				l.full = now
			}
			l.full += int64(l.every)
		}
		n++
	}
	if n == max {
		return n
	}
	conc, rate := map[string]bool{}, map[string]bool{}
	for _, j := range cands {
		if j.State != StatePending {
			continue
		}
		switch m.blockedBy(j, now) {
		case 1:
			conc[j.Queue] = true
		case 2:
			rate[j.Queue] = true
		}
	}
	for q := range conc {
		m.limits[q].limited++
	}
	for q := range rate {
		m.limits[q].rateLimited++
	}
	return n
}

// applyLimit applies a limit command, reporting whether it changed.
func (m *model) applyLimit(c Command) bool {
	get := func(q string) *modelLimit {
		if m.limits[q] == nil {
			m.limits[q] = &modelLimit{kinds: map[string]uint32{}}
		}
		return m.limits[q]
	}
	changed := false
	switch c := c.(type) {
	case *SetLimitCmd:
		l := get(c.Queue)
		if c.Kind == "" {
			changed, l.max = l.max != c.Max, c.Max
		} else {
			changed, l.kinds[c.Kind] = l.kinds[c.Kind] != c.Max, c.Max
		}
	case *ClearLimitCmd:
		if l := m.limits[c.Queue]; l != nil {
			if c.Kind == "" {
				changed, l.max = l.max != 0, 0
			} else if _, ok := l.kinds[c.Kind]; ok {
				changed = true
				delete(l.kinds, c.Kind)
			}
		}
	case *SetRateCmd:
		l := get(c.Queue)
		if l.every != c.Every || l.burst != c.Burst {
			changed = true
			l.every, l.burst, l.full = c.Every, c.Burst, 0
		}
	case *ClearRateCmd:
		if l := m.limits[c.Queue]; l != nil && l.every != 0 {
			changed = true
			l.every, l.burst, l.full = 0, 0, 0
		}
	}
	for q, l := range m.limits {
		if l.none() {
			delete(m.limits, q)
		}
	}
	return changed
}

// queueLimits is Jobs.Limits by brute force.
func (m *model) queueLimits(now time.Time) []QueueLimits {
	t := toNanos(m.clk.at(now))
	var qs []string
	for q := range m.limits {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	var out []QueueLimits
	for _, q := range qs {
		l := m.limits[q]
		ql := QueueLimits{Queue: q, Max: l.max, Running: m.running(q, ""), Limited: l.limited, RateLimited: l.rateLimited}
		var ks []string
		for k := range l.kinds {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			ql.Kinds = append(ql.Kinds, KindLimit{Kind: k, Max: l.kinds[k], Running: m.running(q, k)})
		}
		if l.every > 0 {
			ql.Rate = &Rate{Every: l.every, Burst: l.burst, Tokens: l.tokens(t), Full: fromNanos(l.full)}
		}
		out = append(out, ql)
	}
	return out
}

// uniqueHolder is the job holding the key of nj submitted at now, nil if
// none; key is the new job's Unique.
func (m *model) uniqueHolder(nj NewJob, now int64) (*Job, *Unique) {
	if nj.Unique == nil {
		return nil, nil
	}
	before := StatesOf(StatePending, StateScheduled, StateRunning, StateWaiting)
	u := &Unique{Period: nj.Unique.Period, States: nj.Unique.States | before, Held: true}
	if nj.Unique.States == 0 {
		u.States = before | StatesOf(StateSucceeded)
	}
	if p := int64(u.Period); p > 0 {
		// The largest multiple of the period not after now.
		w := (now / p) * p
		if w > now {
			w -= p
		}
		u.Window = fromNanos(w)
	}
	sum := sha256.Sum256(nj.Payload)
	for _, j := range m.jobs {
		if j.Unique != nil && j.Unique.Held && j.Queue == nj.Queue && j.Kind == nj.Kind &&
			j.Unique.Window.Equal(u.Window) && bytes.Equal(sum[:], sha256Of(j.Payload)) {
			return j, u
		}
	}
	return nil, u
}

func sha256Of(p []byte) []byte {
	s := sha256.Sum256(p)
	return s[:]
}

// releaseKeys frees the key of every job whose state is not among its
// chosen ones (for good).
func (m *model) releaseKeys() {
	for _, j := range m.jobs {
		if u := j.Unique; u != nil && u.Held && u.States&(1<<j.State) == 0 {
			c := *u
			c.Held = false
			j.Unique = &c
		}
	}
}

// genLimitCmd draws a limit command for the differential test: small
// limits on the test's queues and kinds, invalid ones included.
func genLimitCmd(t *rapid.T) Command {
	q := queuesGen.Draw(t, "lq")
	kind := rapid.SampledFrom([]string{"", "", "k", "k2"}).Draw(t, "lkind")
	switch rapid.IntRange(0, 5).Draw(t, "limitcmd") {
	case 0, 1:
		return &SetLimitCmd{Queue: q, Kind: kind, Max: uint32(rapid.IntRange(0, 3).Draw(t, "lmax"))}
	case 2:
		return &ClearLimitCmd{Queue: q, Kind: kind}
	case 3, 4:
		every := rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 0, -1}).Draw(t, "every")
		return &SetRateCmd{Queue: q, Every: every, Burst: uint32(rapid.IntRange(0, 3).Draw(t, "burst"))}
	}
	return &ClearRateCmd{Queue: q}
}

// genUnique draws unique options: mostly valid, sometimes a period or a
// state set that is refused.
func genUnique(t *rapid.T) *UniqueOpts {
	u := &UniqueOpts{
		Period: rapid.SampledFrom([]time.Duration{0, 0, 5 * time.Second, 30 * time.Second, -time.Second}).Draw(t, "uperiod"),
	}
	switch rapid.IntRange(0, 5).Draw(t, "ustates") {
	case 0:
		u.States = RequiredUniqueStates
	case 1:
		u.States = RequiredUniqueStates | StatesOf(StateDead, StateCanceled)
	case 2:
		u.States = StatesOf(StatePending, StateRunning, StateDead) // the states before a job finishes are implied
	case 3:
		u.States = 1 // refused: no such state
	}
	return u
}
