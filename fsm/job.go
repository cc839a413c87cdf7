package fsm

import (
	"hash/fnv"
	"time"
)

// Limits enforced by Apply (and by EncodeCommand, so a caller learns early).
const (
	MaxIDLen      = 256     // job ID bytes
	MaxNameLen    = 128     // queue, kind and worker name bytes
	MaxKeyLen     = 256     // idempotency key bytes
	MaxPayload    = 1 << 20 // job payload bytes
	MaxResult     = 64 << 10
	MaxMessage    = 4 << 10 // nak error, term reason, cancel reason bytes
	MaxSubmit     = 10000   // jobs per submit command
	MaxClaim      = 1000    // jobs per claim command
	MaxClaimQueue = 64      // queues named by one claim
	MaxClaimKinds = 64      // kinds named by one claim (ClaimCmd.Kinds)
	MaxAttempts   = 1 << 16 // upper bound of NewJob.MaxAttempts
	// MaxLeaseTTL bounds claim and extend TTLs.
	MaxLeaseTTL = 24 * time.Hour
	// MaxDelay bounds backoff delays, nak delays and backoff policy fields.
	MaxDelay = 366 * 24 * time.Hour
)

// Defaults applied at submit when a field is zero.
const (
	DefaultMaxAttempts   = 25
	DefaultBackoffBase   = time.Second
	DefaultBackoffMax    = time.Hour
	DefaultBackoffFactor = 2000 // ×2.0
)

// State is a job's lifecycle state.
type State uint8

// States. Numeric values are part of the encodings: never renumber.
const (
	StateInvalid   State = iota
	StatePending         // ready: claimable now
	StateScheduled       // waiting for RunAt (delayed or backing off)
	StateRunning         // claimed under a lease
	StateSucceeded       // acked (terminal)
	StateDead            // termed, or out of attempts (terminal)
	StateCanceled        // canceled (terminal)
	StateWaiting         // waiting for its parents to succeed (NewJob.After; deps.go)
	numStates
)

var stateNames = [numStates]string{"invalid", "pending", "scheduled", "running", "succeeded", "dead", "canceled", "waiting"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "state(?)"
}

// Terminal reports whether s is succeeded, dead or canceled: only terminal
// jobs are removed by retention sweeps.
func (s State) Terminal() bool { return s >= StateSucceeded && s <= StateCanceled }

// Valid reports whether s is a real state.
func (s State) Valid() bool { return s > StateInvalid && s < numStates }

// Backoff is a job's deterministic retry policy. After a failed attempt n
// (n >= 1, a nak without delay or an expired lease) the job waits
//
//	d = min(Base × (Factor/1000)^(n-1), Max)
//
// and then, if Jitter > 0, d is reduced by up to Jitter percent, by an amount
// derived from a hash of (job ID, n) — never from randomness, so every member
// computes the same delay. Zero fields take the defaults (Base 1 s, Max 1 h,
// Factor 2000 = ×2); a Max below the (defaulted) Base is raised to Base. Use
// Base = 1ns for (nearly) immediate retries.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Factor uint32 // growth per attempt in thousandths, 1000..100000
	Jitter uint8  // percent, 0..100
}

func (b Backoff) withDefaults() Backoff {
	if b.Base == 0 {
		b.Base = DefaultBackoffBase
	}
	if b.Max == 0 {
		b.Max = DefaultBackoffMax
	}
	// A Max below the (defaulted) Base caps nothing: raise it, so the
	// result validates and withDefaults is idempotent (a snapshot of the
	// stored policy restores).
	if b.Max < b.Base {
		b.Max = b.Base
	}
	if b.Factor == 0 {
		b.Factor = DefaultBackoffFactor
	}
	return b
}

func (b Backoff) validate() *refusal {
	switch {
	case b.Base < 0 || b.Base > MaxDelay:
		return refuse(CodeInvalidCommand, "backoff base %v out of range", b.Base)
	case b.Max < 0 || b.Max > MaxDelay:
		return refuse(CodeInvalidCommand, "backoff max %v out of range", b.Max)
	case b.Max != 0 && b.Max < b.Base:
		return refuse(CodeInvalidCommand, "backoff max %v below base %v", b.Max, b.Base)
	case b.Factor != 0 && (b.Factor < 1000 || b.Factor > 100000):
		return refuse(CodeInvalidCommand, "backoff factor %d out of [1000,100000]", b.Factor)
	case b.Jitter > 100:
		return refuse(CodeInvalidCommand, "backoff jitter %d%% above 100", b.Jitter)
	}
	return nil
}

// Delay returns the wait after failed attempt n of the job with the given ID
// (see Backoff). b must already carry its defaults (as stored jobs do).
func (b Backoff) Delay(id string, n uint32) time.Duration {
	d := int64(b.Base)
	limit := int64(b.Max)
	for i := uint32(1); i < n && d < limit && b.Factor > 1000; i++ {
		if d > (1<<62)/int64(b.Factor) {
			d = limit
			break
		}
		d = d * int64(b.Factor) / 1000
	}
	if d > limit {
		d = limit
	}
	if b.Jitter > 0 && d > 0 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
		frac := int64(h.Sum64() % 1001) // 0..1000
		d -= (d / 100000) * int64(b.Jitter) * frac
	}
	if d < 1 {
		d = 1
	}
	return time.Duration(d)
}

// Lease is a running job's claim. Token is the raft index of the claim entry:
// the fencing token ack, nak, extend and term must carry.
type Lease struct {
	Token    uint64
	Worker   string
	Deadline time.Time
	TTL      time.Duration
	// Term is the raft term of the entry that last set Deadline (the claim or
	// the latest extend): whose clock Deadline is on.
	Term uint64
	// ClaimID is the ID of the claim that granted the lease (ClaimCmd.ID),
	// empty if it had none.
	ClaimID string
}

// EndKind says what ended a lease. Numeric values are part of the
// encodings: never renumber.
type EndKind uint8

// How a lease ends.
const (
	EndNone     EndKind = iota
	EndAcked            // ack by its token: the job succeeded
	EndNaked            // nak by its token: the attempt failed
	EndTermed           // term by its token: the job is dead
	EndExpired          // expire: the lease passed its deadline
	EndCanceled         // cancel of the running job
	numEnds
)

var endNames = [numEnds]string{"none", "acked", "naked", "termed", "expired", "canceled"}

func (k EndKind) String() string {
	if k < numEnds {
		return endNames[k]
	}
	return "end(?)"
}

// LeaseEnd is how a job's most recent lease ended: the lease's token, what
// ended it and, for a nak or term, the digest of that request. It is what
// makes ack, nak and term idempotent per request: repeating the very
// request that ended this lease (same command kind, same token, and the
// same result for an ack, the same delay and error for a nak, the same
// reason for a term) answers success and changes nothing; any other
// request is refused ErrStaleLease (see AckCmd). Job.LastLease is nil
// until a lease ends (and for a job restored from a version 1 snapshot,
// which did not record it); a claim does not clear it: while a new lease
// runs it names the previous.
type LeaseEnd struct {
	Token uint64
	By    EndKind
	// Sum is the digest of the nak or term that ended the lease
	// (NakCmd.Sum, TermCmd.Sum), never 0 for those; 0 for every other end
	// (an ack's request is the job's Result, which it keeps), and for a
	// nak or term whose end was restored from a snapshot of version 4 or
	// older, which did not record it: a repeat of that nak or term cannot
	// be shown to be the same request, so it is refused stale.
	Sum uint64
}

// NewJob is one job of a submit command.
type NewJob struct {
	// ID is the caller's job ID. Empty: the state machine derives one from
	// the entry ("@" + 16 hex digits of the index + "." + batch position),
	// so caller IDs must not start with '@'. A submit whose ID exists is a
	// duplicate.
	ID    string
	Queue string
	Kind  string
	// Payload is opaque to the state machine, at most MaxPayload bytes.
	Payload []byte
	// Priority: larger values are claimed first.
	Priority int32
	// RunAt delays the job; zero or not after the entry's time means now.
	RunAt time.Time
	// MaxAttempts caps claims (0 → DefaultMaxAttempts).
	MaxAttempts uint32
	Backoff     Backoff
	// IdempotencyKey, if set, makes a later submit with the same key a
	// duplicate for as long as the keyed job is retained. Keys are global
	// (not per queue).
	IdempotencyKey string
	// After names the job's parents (at most MaxParents, distinct, not the
	// job itself): it waits (StateWaiting) until every one succeeded, and
	// ends by OnParentFailure when one ends otherwise (deps.go).
	After           []string
	OnParentFailure ParentPolicy
	// Unique, if set, makes the job unique by (queue, kind, payload)
	// within a period and among states (unique.go): a submit whose key a
	// job holds is a duplicate of that job.
	Unique *UniqueOpts
}

// Job is a snapshot of one job as a query or result returns it. Its slices
// (Payload, Result, After, Unmet) are the caller's own: results decode
// them afresh and queries (Get, List) copy them out of the state, so a
// caller that writes into them changes nothing in the state machine.
type Job struct {
	ID             string
	Queue          string
	Kind           string
	Payload        []byte // omitted (nil) in submit/ack/nak/... results; present in claims and queries
	Priority       int32
	RunAt          time.Time
	MaxAttempts    uint32
	Backoff        Backoff
	IdempotencyKey string
	Attempts       uint32 // claims so far (counted at claim)
	State          State
	Lease          *Lease    // non-nil only while running
	LastLease      *LeaseEnd // how the most recent lease that ended ended (see LeaseEnd)
	LastError      string    // nak error, term/cancel reason, "lease expired"
	Result         []byte    // ack result (succeeded only)
	Seq            uint64    // submit sequence: ties in the ready order
	Created        time.Time
	Updated        time.Time
	Finished       time.Time // when it became terminal (zero otherwise)
	// After: the job's parents (NewJob.After), nil when none; Unmet: those
	// not yet known to have succeeded (a waiting job waits for them);
	// OnParentFailure: what a parent's failure does to it.
	After           []string
	Unmet           []string
	OnParentFailure ParentPolicy
	// Batch is the ID of the batch the job was submitted in ("" none).
	Batch  string
	Unique *Unique // a unique job's key (nil for other jobs)
}

// fromNanos converts the internal clock representation (unix nanoseconds,
// 0 = unset) to a time.Time in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// toNanos is the inverse of fromNanos; times outside int64 nanoseconds
// saturate.
func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	const minSec, maxSec = -9223372036, 9223372035
	switch s := t.Unix(); {
	case s < minSec:
		return -1 << 63
	case s > maxSec:
		return 1<<63 - 1
	}
	return t.UnixNano()
}

// addSat adds without overflowing.
func addSat(a, b int64) int64 {
	c := a + b
	if b > 0 && c < a {
		return 1<<63 - 1
	}
	if b < 0 && c > a {
		return -1 << 63
	}
	return c
}
