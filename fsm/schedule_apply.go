package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	"github.com/jobraft/jobraft/internal/test/bugs"
	"github.com/tidwall/btree"
)

// schedEnt is one schedule in the state's schedule tree with its digest
// contribution. Published entries are never written: a change sets a new
// entry (snapshots share the tree copy-on-write).
type schedEnt struct {
	s   *Schedule
	sum [4]uint64
}

// schedules is the state's share for schedules: the tree by ID and the
// lane-wise sum of the entries' hashes (as the jobs' accumulator).
type schedules struct {
	tree *btree.BTreeG[*schedEnt]
	acc  [4]uint64
}

func newSchedTree() *btree.BTreeG[*schedEnt] {
	return btree.NewBTreeGOptions(func(a, b *schedEnt) bool { return a.s.ID < b.s.ID }, btree.Options{NoLocks: true})
}

// schedTree returns the state's schedules, creating the tree on first use.
func (s *state) schedTree() *schedules {
	if s.sch.tree == nil {
		s.sch.tree = newSchedTree()
	}
	return &s.sch
}

func (s *state) schedule(id string) *Schedule {
	if s.sch.tree == nil {
		return nil
	}
	e, _ := s.sch.tree.Get(&schedEnt{s: &Schedule{ScheduleDef: ScheduleDef{ID: id}}})
	if e == nil {
		return nil
	}
	return e.s
}

// setSchedule publishes sc (a new value, never written again) in place of
// the schedule of its ID, if any; nil sc with id deletes.
func (s *state) setSchedule(id string, sc *Schedule) {
	t := s.schedTree()
	if old, ok := t.tree.Delete(&schedEnt{s: &Schedule{ScheduleDef: ScheduleDef{ID: id}}}); ok {
		for i, v := range old.sum {
			t.acc[i] -= v
		}
	}
	if sc == nil {
		return
	}
	e := &schedEnt{s: sc, sum: schedHash(sc)}
	for i, v := range e.sum {
		t.acc[i] += v
	}
	t.tree.Set(e)
}

func schedHash(sc *Schedule) (sum [4]uint64) {
	h := sha256.Sum256(appendSchedule([]byte("sched\x00"), sc))
	for i := range sum {
		sum[i] = binary.LittleEndian.Uint64(h[i*8:])
	}
	return sum
}

// appendSchedDigest appends the schedules' share of the state digest:
// nothing when there are none (a state without schedules digests as
// before them), else their count and accumulator.
func (s *state) appendSchedDigest(b []byte) []byte {
	if s.sch.tree == nil || s.sch.tree.Len() == 0 {
		return b
	}
	b = append(b, "schedules"...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.sch.tree.Len()))
	for _, v := range s.sch.acc {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// applySchedule applies a schedule command at log time now.
func (s *state) applySchedule(e Entry, now int64, c Command, r *result) *refusal {
	switch c := c.(type) {
	case *ScheduleCmd:
		if old := s.schedule(c.Def.ID); old != nil {
			if !sameDef(&old.ScheduleDef, &c.Def) {
				return refuse(CodeScheduleExists, "schedule %q", c.Def.ID)
			}
			r.sched = old
			return nil
		}
		sc := &Schedule{ScheduleDef: c.Def, Created: fromNanos(now)}
		sc.ID = c.Def.ID
		sc.Next = fromNanos(sc.tickAfter(now, now))
		s.setSchedule(sc.ID, sc)
		r.sched, r.changed = sc, true
	case *ScheduleSetCmd:
		old := s.schedule(c.ID)
		if old == nil {
			return refuse(CodeScheduleNotFound, "schedule %q", c.ID)
		}
		r.sched = old
		switch c.Op {
		case ScheduleDelete:
			s.setSchedule(c.ID, nil)
			r.changed = true
		case SchedulePause, ScheduleResume:
			pause := c.Op == SchedulePause
			if old.Paused == pause {
				return nil
			}
			n := *old
			n.Paused = pause
			if !pause {
				n.Next = fromNanos(n.tickAfter(toNanos(n.Created), now))
			}
			s.setSchedule(c.ID, &n)
			r.sched, r.changed = &n, true
		}
	case *FireCmd:
		s.fire(e, now, r)
	}
	return nil
}

// tickAfter is the definition's tickAfter anchored at the schedule's
// create.
func (sc *Schedule) tickAfter(anchor, after int64) int64 {
	return sc.ScheduleDef.tickAfter(anchor, after)
}

// fire fires every running schedule whose next tick is at or before now,
// in ID order.
func (s *state) fire(e Entry, now int64, r *result) {
	if s.sch.tree == nil {
		return
	}
	var due []*Schedule
	s.sch.tree.Scan(func(en *schedEnt) bool {
		if sc := en.s; !sc.Paused && !sc.Next.IsZero() && toNanos(sc.Next) <= now {
			due = append(due, sc)
		}
		return true
	})
	for _, old := range due {
		n := *old
		n.Open = slices.Clone(old.Open)
		s.fireOne(e, now, &n, r)
		s.setSchedule(n.ID, &n)
		r.changed = true
	}
}

// fireOne fires n's due ticks (n.Next <= now): the current tick (the last
// at or before now) and, before it, the missed ones (their successor was
// due too), which by the catch-up policy fire once (as the first missed
// tick's job) or not at all.
func (s *state) fireOne(e Entry, now int64, n *Schedule, r *result) {
	anchor := toNanos(n.Created)
	first := toNanos(n.Next)
	cur, count := first, uint64(1)
	for {
		t := n.tickAfter(anchor, cur)
		if t == 0 || t > now {
			n.Next = fromNanos(t)
			break
		}
		if n.Cron == "" {
			// Intervals in closed form: the last tick at or before now.
			k := (now - t) / int64(n.Every)
			cur, count = t+k*int64(n.Every), count+1+uint64(k)
			continue
		}
		cur, count = t, count+1
	}
	if count > 1 {
		missed := count - 1
		if n.CatchUp == CatchUpOne {
			s.fireTick(e, now, n, first, r)
			missed--
		}
		n.Missed += missed
	}
	s.fireTick(e, now, n, cur, r)
	n.LastTick = fromNanos(cur)
}

// fireTick creates tick's job unless the overlap policy skips it.
func (s *state) fireTick(e Entry, now int64, n *Schedule, tick int64, r *result) {
	if n.Overlap != OverlapAllow {
		open := n.Open[:0]
		queued := false
		for _, id := range n.Open {
			j := s.get(id)
			if j == nil || j.state.Terminal() {
				continue
			}
			open = append(open, id)
			queued = queued || j.state == StatePending || j.state == StateScheduled
		}
		if n.Open = open; len(open) == 0 {
			n.Open = nil
		}
		if (n.Overlap == OverlapSkip && len(open) > 0) || (n.Overlap == OverlapOne && queued) {
			n.Skipped++
			return
		}
	}
	if bugs.On("schedid") {
		// The bug: the job's ID from the proposer's clock (the entry's
		// stamp) cut to the second, not from the tick.
		tick = toNanos(e.Time) / int64(time.Second) * int64(time.Second)
	}
	id := ScheduleJobID(n.ID, fromNanos(tick))
	n.Fired++
	if s.get(id) != nil {
		return // cannot happen: a tick fires once (IDs are the tick's)
	}
	t := &n.Job
	cls := s.class(s.queueOrCreate(t.Queue), keyOf(t.Kind, t.Backoff.withDefaults(), t.MaxAttempts))
	s.seq++
	j := &job{
		id: id, cls: cls, payload: viewString(t.Payload), // the template's: decoded, never written
		runAt: now, created: now, updated: now, seq: s.seq,
		prio: t.Priority, state: StatePending,
	}
	s.insert(j)
	if n.Overlap != OverlapAllow {
		n.Open = append(n.Open, id)
	}
	r.fired = append(r.fired, id)
}

// schedCopy is a copy-on-write copy of the schedule tree for a snapshot
// (nil when there are none).
func (s *state) schedCopy() *btree.BTreeG[*schedEnt] {
	if s.sch.tree == nil || s.sch.tree.Len() == 0 {
		return nil
	}
	return s.sch.tree.Copy()
}
