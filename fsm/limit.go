package fsm

import (
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/btree"
)

// Cluster-wide limits on claims, held in the replicated state:
//
//   - a concurrency limit per queue, and per (queue, kind): at most Max
//     jobs of it running at once (SetLimitCmd, ClearLimitCmd);
//   - a rate per queue: a token bucket of Burst tokens refilled one per
//     Every of log time, one token taken per job leased (SetRateCmd,
//     ClearRateCmd).
//
// Both are enforced when a claim is applied (limit_claim.go): a claim
// leases from a queue at most what its limits leave and passes over the
// rest without changing them, as a claim's kinds do. Running counts are
// the jobs in the running state, so an expired lease stops counting when
// the expire command ends it, never before, and every member counts the
// same whatever worker or member the claims came from.

// MaxRateBurst bounds SetRateCmd.Burst.
const MaxRateBurst = 1 << 20

// SetLimitCmd sets the concurrency limit of a queue (Kind empty) or of one
// kind of it: claims lease a job of it only while fewer than Max jobs of
// it are running. Max 0 is refused (ErrInvalidCommand): ClearLimitCmd
// removes a limit. Setting the limit it already has changes nothing
// (Result.Changed false). A limit lowered below the jobs running lets
// them run: claims lease none until fewer than Max run.
type SetLimitCmd struct {
	Queue, Kind string
	Max         uint32
}

// ClearLimitCmd removes the concurrency limit of a queue (Kind empty) or
// of one kind of it; Result.Changed is false when there was none.
type ClearLimitCmd struct{ Queue, Kind string }

// SetRateCmd sets a queue's rate: a token bucket of Burst tokens (1 ..
// MaxRateBurst), one token added per Every of log time (1 ns .. MaxDelay),
// one taken per job a claim leases from the queue; a claim leases nothing
// more from the queue once the bucket is empty. A new or changed rate
// starts with a full bucket; setting the rate the queue has changes
// nothing (its bucket included).
type SetRateCmd struct {
	Queue string
	Every time.Duration
	Burst uint32
}

// ClearRateCmd removes a queue's rate; Result.Changed is false when it had
// none.
type ClearRateCmd struct{ Queue string }

// Type implementations.
func (SetLimitCmd) Type() CommandType   { return CmdSetLimit }
func (ClearLimitCmd) Type() CommandType { return CmdClearLimit }
func (SetRateCmd) Type() CommandType    { return CmdSetRate }
func (ClearRateCmd) Type() CommandType  { return CmdClearRate }

// validateLimit checks the limit commands' fields (validate's cases).
func validateLimit(c Command) *refusal {
	switch c := c.(type) {
	case *SetLimitCmd:
		if r := checkLimitTarget(c.Queue, c.Kind); r != nil {
			return r
		}
		if c.Max == 0 {
			return refuse(CodeInvalidCommand, "concurrency limit 0 (clear the limit instead)")
		}
	case *ClearLimitCmd:
		return checkLimitTarget(c.Queue, c.Kind)
	case *SetRateCmd:
		if r := checkName("queue", c.Queue); r != nil {
			return r
		}
		if c.Every <= 0 || c.Every > MaxDelay {
			return refuse(CodeInvalidCommand, "rate interval %v out of [1ns, %v]", c.Every, MaxDelay)
		}
		if c.Burst == 0 || c.Burst > MaxRateBurst {
			return refuse(CodeInvalidCommand, "rate burst %d out of [1, %d]", c.Burst, MaxRateBurst)
		}
	case *ClearRateCmd:
		return checkName("queue", c.Queue)
	}
	return nil
}

func checkLimitTarget(queue, kind string) *refusal {
	if r := checkName("queue", queue); r != nil {
		return r
	}
	if kind != "" {
		return checkName("kind", kind)
	}
	return nil
}

// Limit command encoding (format version 1, types 17 to 20):
//
//	set limit:   queue, kind (str; empty: the queue), max (uvarint)
//	clear limit: queue, kind
//	set rate:    queue, every (varint ns), burst (uvarint)
//	clear rate:  queue
func appendLimitCmd(b []byte, c Command) []byte {
	switch c := c.(type) {
	case *SetLimitCmd:
		b = appendStr(appendStr(b, c.Queue), c.Kind)
		b = binary.AppendUvarint(b, uint64(c.Max))
	case *ClearLimitCmd:
		b = appendStr(appendStr(b, c.Queue), c.Kind)
	case *SetRateCmd:
		b = appendStr(b, c.Queue)
		b = binary.AppendVarint(b, int64(c.Every))
		b = binary.AppendUvarint(b, uint64(c.Burst))
	case *ClearRateCmd:
		b = appendStr(b, c.Queue)
	}
	return b
}

func decodeLimitCmd(t CommandType, d *decoder) Command {
	switch t {
	case CmdSetLimit:
		return &SetLimitCmd{Queue: d.str(), Kind: d.str(), Max: d.u32()}
	case CmdClearLimit:
		return &ClearLimitCmd{Queue: d.str(), Kind: d.str()}
	case CmdSetRate:
		return &SetRateCmd{Queue: d.str(), Every: durationOf(d.varint()), Burst: d.u32()}
	}
	return &ClearRateCmd{Queue: d.str()}
}

// qlimit is one queue's limits (a queue's record exists while it holds a
// limit): its concurrency limit, its kinds', its rate and bucket, and the
// claims its limits held back. Mutated in place on the apply goroutine
// (snapshots copy the records).
type qlimit struct {
	queue string
	max   uint32      // 0: none
	kinds []kindLimit // in kind order
	every int64       // the rate's interval, 0: no rate
	burst uint32
	// full is the log time at which the bucket is full again: it holds
	// burst - ceil((full-now)/every) tokens at now (all when full <= now).
	full int64
	// limited and rateLimited count the claims held back by a
	// concurrency limit of the queue (its own or a kind's) and by its rate
	// (limit_claim.go).
	limited, rateLimited uint64
}

type kindLimit struct {
	kind    string
	max     uint32
	running int // jobs of the kind running in the queue (derived)
}

func newLimits() *btree.BTreeG[*qlimit] {
	return btree.NewBTreeGOptions(func(a, b *qlimit) bool { return a.queue < b.queue }, btree.Options{NoLocks: true})
}

func (l *qlimit) empty() bool { return l.max == 0 && len(l.kinds) == 0 && l.every == 0 }

// kind returns the index of kind's limit, or where it would go.
func (l *qlimit) kind(kind string) (int, bool) {
	return slices.BinarySearchFunc(l.kinds, kind, func(k kindLimit, s string) int { return strings.Compare(k.kind, s) })
}

// tokens is the bucket's content at log time now (a rate must be set).
func (l *qlimit) tokens(now int64) uint32 {
	d := subSat(l.full, now)
	if d <= 0 {
		return l.burst
	}
	owed := uint64(d-1)/uint64(l.every) + 1
	if owed >= uint64(l.burst) {
		return 0
	}
	return l.burst - uint32(owed)
}

// take takes one token at now (the caller checked there is one).
func (l *qlimit) take(now int64) { l.full = addSat(max(l.full, now), l.every) }

// limitOf returns queue's limits, nil if it has none.
func (s *state) limitOf(queue string) *qlimit {
	if s.limits.Len() == 0 {
		return nil
	}
	l, _ := s.limits.Get(&qlimit{queue: queue})
	return l
}

func (s *state) limitOrCreate(queue string) *qlimit {
	if l := s.limitOf(queue); l != nil {
		return l
	}
	l := &qlimit{queue: strings.Clone(queue)}
	s.limits.Set(l)
	return l
}

func (s *state) dropLimitIfEmpty(l *qlimit) {
	if l.empty() {
		s.limits.Delete(l)
	}
}

// applyLimit applies a limit command at log time now.
func (s *state) applyLimit(now int64, c Command, r *result) {
	switch c := c.(type) {
	case *SetLimitCmd:
		l := s.limitOrCreate(c.Queue)
		if c.Kind == "" {
			r.changed = l.max != c.Max
			l.max = c.Max
			return
		}
		i, ok := l.kind(c.Kind)
		if ok {
			r.changed = l.kinds[i].max != c.Max
			l.kinds[i].max = c.Max
			return
		}
		r.changed = true
		l.kinds = slices.Insert(l.kinds, i, kindLimit{kind: strings.Clone(c.Kind), max: c.Max, running: s.runningOfKind(c.Queue, c.Kind)})
	case *ClearLimitCmd:
		l := s.limitOf(c.Queue)
		if l == nil {
			return
		}
		if c.Kind == "" {
			r.changed = l.max != 0
			l.max = 0
		} else if i, ok := l.kind(c.Kind); ok {
			r.changed = true
			l.kinds = slices.Delete(l.kinds, i, i+1)
		}
		s.dropLimitIfEmpty(l)
	case *SetRateCmd:
		l := s.limitOrCreate(c.Queue)
		if l.every == int64(c.Every) && l.burst == c.Burst {
			return
		}
		r.changed = true
		l.every, l.burst, l.full = int64(c.Every), c.Burst, 0
	case *ClearRateCmd:
		l := s.limitOf(c.Queue)
		if l == nil || l.every == 0 {
			return
		}
		r.changed = true
		l.every, l.burst, l.full = 0, 0, 0
		s.dropLimitIfEmpty(l)
	}
}

// runningOfKind counts queue's running jobs of kind: O(running jobs of
// the queue), once per kind limit set.
func (s *state) runningOfKind(queue, kind string) int {
	q := s.queue(queue)
	if q == nil {
		return 0
	}
	n := 0
	q.running.Scan(func(it item) bool {
		if s.rec(it).cls.kind == kind {
			n++
		}
		return true
	})
	return n
}

// limitMove counts j (d = +1) or uncounts it (d = -1) among the running
// jobs of its kind's limit, if its queue has one. Called for every job
// that enters or leaves the running state.
func (s *state) limitMove(j *job, d int) {
	l := s.limitOf(j.cls.queue)
	if l == nil || len(l.kinds) == 0 {
		return
	}
	if i, ok := l.kind(j.cls.kind); ok {
		l.kinds[i].running += d
	}
}

// limitRunning is limitMove for a state change old -> n of one job.
func (s *state) limitRunning(old, n *job) {
	if s.limits.Len() == 0 || (old.state == StateRunning) == (n.state == StateRunning) {
		return
	}
	if old.state == StateRunning {
		s.limitMove(old, -1)
	} else {
		s.limitMove(n, 1)
	}
}

// appendLimit encodes one queue's limits (snapshot record 'L' and the
// digest): queue (str), max (uvarint), kind count (uvarint), then per kind
// in kind order: kind (str), max (uvarint); every (varint ns), burst
// (uvarint), full (varint ns), limited, rate limited (uvarint). Running
// counts are derived from the jobs and not encoded.
func appendLimit(b []byte, l *qlimit) []byte {
	b = appendStr(b, l.queue)
	b = binary.AppendUvarint(b, uint64(l.max))
	b = binary.AppendUvarint(b, uint64(len(l.kinds)))
	for _, k := range l.kinds {
		b = appendStr(b, k.kind)
		b = binary.AppendUvarint(b, uint64(k.max))
	}
	b = binary.AppendVarint(b, l.every)
	b = binary.AppendUvarint(b, uint64(l.burst))
	b = binary.AppendVarint(b, l.full)
	b = binary.AppendUvarint(b, l.limited)
	return binary.AppendUvarint(b, l.rateLimited)
}

// decodeLimit reads what appendLimit wrote and checks its invariants
// (a reason, "" if it holds).
func decodeLimit(d *decoder) (*qlimit, string) {
	l := &qlimit{queue: d.str(), max: d.u32()}
	n := d.count(MaxClaimKinds*1024, 2)
	for i := 0; i < n && d.err == nil; i++ {
		l.kinds = append(l.kinds, kindLimit{kind: d.str(), max: d.u32()})
	}
	l.every, l.burst, l.full = d.varint(), d.u32(), d.varint()
	l.limited, l.rateLimited = d.uvarint(), d.uvarint()
	if d.err != nil {
		return nil, d.err.Error()
	}
	switch {
	case checkName("queue", l.queue) != nil:
		return nil, "bad queue"
	case l.empty():
		return nil, "no limit"
	case l.every < 0 || l.every > int64(MaxDelay) || (l.every == 0) != (l.burst == 0) || l.burst > MaxRateBurst:
		return nil, "bad rate"
	case l.every == 0 && l.full != 0:
		return nil, "bucket without a rate"
	}
	for i, k := range l.kinds {
		if checkName("kind", k.kind) != nil || k.max == 0 || (i > 0 && k.kind <= l.kinds[i-1].kind) {
			return nil, "bad kind limit"
		}
	}
	return l, ""
}

// limitsDigestTag starts the limits' part of the state digest: it follows
// the paused queues' names, whose length prefixes (at most MaxNameLen)
// never start with it.
const limitsDigestTag = 0xff

// appendLimitsDigest appends the limits' part of the digest: nothing
// without limits (so the digest of a state without them is as before),
// else the tag and every queue's record in queue order.
func (s *state) appendLimitsDigest(b []byte) []byte {
	if s.limits.Len() == 0 {
		return b
	}
	b = append(b, limitsDigestTag)
	s.limits.Scan(func(l *qlimit) bool {
		b = appendLimit(b, l)
		return true
	})
	return b
}

// copyLimits deep-copies the limits (a snapshot's), in queue order.
func (s *state) copyLimits() []qlimit {
	var out []qlimit
	s.limits.Scan(func(l *qlimit) bool {
		c := *l
		c.kinds = slices.Clone(l.kinds)
		out = append(out, c)
		return true
	})
	return out
}
