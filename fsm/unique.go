package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/bugs"
)

// Unique jobs (NewJob.Unique, as River's UniqueOpts): a submitted job with
// unique options has a key, (queue, kind, SHA-256 of its payload, period
// window), and holds it from its creation for as long as its state stays
// among its chosen states. A submit of a job whose key a job holds is
// answered OutcomeDuplicate with that job, and creates nothing.
//
// The window is the period's slice of log time the submit applied in
// (the log time rounded down to a multiple of Period; none without a
// period): one job per key per window.
//
// The chosen states always include pending, scheduled, running and
// waiting (a job holds its key until it finishes) plus any of succeeded,
// dead and canceled. The first time the job enters a state not chosen, its key
// frees for good: a later submit with the key creates a new job, and the
// first job never takes the key back (Job.Unique.Held stays false), even
// when a retry makes it pending again. A retention sweep that removes a
// job holding its key frees the key too.

// StateSet is a set of job states: bit 1<<s holds state s.
type StateSet uint8

// StatesOf returns the set of the given states.
func StatesOf(states ...State) StateSet {
	var ss StateSet
	for _, s := range states {
		ss |= 1 << s
	}
	return ss
}

// Has reports whether s is in the set.
func (ss StateSet) Has(s State) bool { return s < 8 && ss&(1<<s) != 0 }

// States lists the set's states in state order.
func (ss StateSet) States() []State {
	var out []State
	for s := StatePending; s < numStates; s++ {
		if ss.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

const (
	allStates StateSet = (1<<numStates - 1) &^ 1
	// RequiredUniqueStates are the states every unique job holds its key
	// in, whatever UniqueOpts.States says: the states before a job
	// finishes (pending, scheduled, running, waiting).
	RequiredUniqueStates = StateSet(1<<StatePending | 1<<StateScheduled | 1<<StateRunning | 1<<StateWaiting)
	// DefaultUniqueStates is the set UniqueOpts.States 0 stands for:
	// every state but dead and canceled (River's default).
	DefaultUniqueStates = RequiredUniqueStates | 1<<StateSucceeded
)

// UniqueOpts makes a submitted job unique by (queue, kind, payload)
// within a period of log time and among states.
type UniqueOpts struct {
	// Period, when set (up to MaxDelay), splits log time into windows of
	// Period (multiples of it since the Unix epoch): the job is unique
	// within the window its submit applied in. Zero: no window.
	Period time.Duration
	// States are the states in which a job holds its key (0:
	// DefaultUniqueStates): RequiredUniqueStates always, and those of
	// succeeded, dead and canceled it names.
	States StateSet
}

func (u *UniqueOpts) validate() *refusal {
	if u.Period < 0 || u.Period > MaxDelay {
		return refuse(CodeInvalidCommand, "unique period %v out of [0, %v]", u.Period, MaxDelay)
	}
	if u.States&^allStates != 0 {
		return refuse(CodeInvalidCommand, "unique states %#x name a state that does not exist", uint8(u.States))
	}
	return nil
}

func (u *UniqueOpts) states() StateSet {
	if u.States == 0 {
		return DefaultUniqueStates
	}
	return u.States | RequiredUniqueStates
}

// Unique is a unique job's key as Job.Unique reports it.
type Unique struct {
	Period time.Duration
	States StateSet // the chosen states, defaults applied
	// Window is the start of the period window of the job's key (zero
	// without a period).
	Window time.Time
	// Held: the job holds its key (its state has been among States since
	// it was created); false once it left them, for good.
	Held bool
}

// uniq is a job record's unique key (immutable once published: a record
// whose key frees gets a copy).
type uniq struct {
	period, window int64
	states         StateSet
	held           bool
	sum            [32]byte // SHA-256 of the payload (derived, not encoded)
}

func (u *uniq) public() *Unique {
	if u == nil {
		return nil
	}
	return &Unique{Period: time.Duration(u.period), States: u.states, Window: fromNanos(u.window), Held: u.held}
}

// uniqKey indexes the jobs holding their keys.
type uniqKey struct {
	queue, kind string
	sum         [32]byte
	window      int64
}

func (u *uniq) key(j *job) uniqKey {
	return uniqKey{queue: j.cls.queue, kind: j.cls.kind, sum: u.sum, window: u.window}
}

// window is the start of the period window holding log time now.
func window(now, period int64) int64 {
	if period <= 0 {
		return 0
	}
	w := now - now%period
	if now < 0 && now%period != 0 {
		w -= period
	}
	return w
}

// unique returns the unique key of a job nj submitted at log time now
// (nil without unique options) and the job holding that key, if any.
func (s *state) unique(nj *NewJob, now int64) (*uniq, *job) {
	if nj.Unique == nil {
		return nil, nil
	}
	p := int64(nj.Unique.Period)
	u := &uniq{period: p, window: window(now, p), states: nj.Unique.states(), held: true, sum: sha256.Sum256(nj.Payload)}
	id, ok := s.uniq[uniqKey{queue: nj.Queue, kind: nj.Kind, sum: u.sum, window: u.window}]
	if !ok || bugs.On("unique") {
		return u, nil
	}
	return u, s.get(id)
}

// uniqueIndex adds j's key to the index (or removes it), if j holds one.
func (s *state) uniqueIndex(j *job, add bool) {
	u := j.uniq()
	if u == nil || !u.held {
		return
	}
	if add {
		s.uniq[u.key(j)] = j.id
	} else {
		delete(s.uniq, u.key(j))
	}
}

// uniqueLeave frees the key of n (a job's private new record) when its
// new state is not among its chosen ones.
func (s *state) uniqueLeave(n *job) {
	if u := n.uniq(); u != nil && u.held && !u.states.Has(n.state) {
		delete(s.uniq, u.key(n))
		c := *u
		c.held = false
		n.setUniq(&c)
	}
}

// uniqueTaken reports whether j (a restored record) holds a key another
// job holds.
func (s *state) uniqueTaken(j *job) bool {
	u := j.uniq()
	if u == nil || !u.held {
		return false
	}
	_, ok := s.uniq[u.key(j)]
	return ok
}

// Job record part (flag 64): period, window (varint ns), states (byte),
// held (byte 0/1).
func appendUniq(b []byte, u *uniq) []byte {
	b = binary.AppendVarint(b, u.period)
	b = binary.AppendVarint(b, u.window)
	b = append(b, byte(u.states))
	return appendBool(b, u.held)
}

func uniqSize(u *uniq) int { return varintLen(u.period) + varintLen(u.window) + 2 }

func decodeUniq(d *decoder) *uniq {
	return &uniq{period: d.varint(), window: d.varint(), states: StateSet(d.byte()), held: d.bool()}
}

// checkUniq verifies a restored record's unique key ("" if it holds).
func checkUniq(j *job) string {
	u := j.uniq()
	switch {
	case u == nil:
		return ""
	case u.period < 0 || u.period > int64(MaxDelay):
		return "bad unique period"
	case u.window != window(u.window, u.period):
		return "unique window not a multiple of its period"
	case u.states&^allStates != 0 || u.states&RequiredUniqueStates != RequiredUniqueStates:
		return "bad unique states"
	case u.held && !u.states.Has(j.state):
		return "unique key held in a state not chosen"
	}
	return ""
}

// Submit extensions (format version 5, FormatVersionSubmitExt): after
// the version 4 part, per job a uvarint bit set of the extensions that
// follow: 1 unique options: period (varint ns), states (byte).
const extUnique = 1

func appendSubmitExt(b []byte, nj *NewJob) []byte {
	if nj.Unique == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, extUnique)
	b = binary.AppendVarint(b, int64(nj.Unique.Period))
	return append(b, byte(nj.Unique.States))
}

func decodeSubmitExt(d *decoder, nj *NewJob) {
	ext := d.uvarint()
	if ext&^extUnique != 0 {
		d.fail("submit extensions %#x", ext)
		return
	}
	if ext&extUnique != 0 {
		nj.Unique = &UniqueOpts{Period: durationOf(d.varint()), States: StateSet(d.byte())}
	}
}

// submitExtSize is the size of nj's extension part (appendSubmitExt).
func submitExtSize(nj *NewJob) int {
	if nj.Unique == nil {
		return 1
	}
	return 1 + varintLen(int64(nj.Unique.Period)) + 1
}

// extended reports whether a submit needs the extended format (a job
// with unique options).
func extended(c *SubmitCmd) bool {
	for i := range c.Jobs {
		if c.Jobs[i].Unique != nil {
			return true
		}
	}
	return false
}

// String lists the set's states ("pending,running").
func (ss StateSet) String() string {
	var names []string
	for _, s := range ss.States() {
		names = append(names, s.String())
	}
	return strings.Join(names, ",")
}
