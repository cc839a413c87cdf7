package fsm

import (
	"fmt"
	"time"
)

// CommandType identifies a command on the wire (byte 1 of an encoded
// command). Values are part of the format: never renumber, only append.
type CommandType uint8

// Command types.
const (
	CmdInvalid CommandType = iota
	CmdSubmit
	CmdClaim
	CmdExtend
	CmdAck
	CmdNak
	CmdTerm
	CmdCancel
	CmdRetry
	CmdExpire
	CmdPause
	CmdResume
	CmdSweep
	CmdBatch
	CmdSchedule    // schedule_codec.go
	CmdScheduleSet // schedule_codec.go
	CmdFire        // schedule_codec.go
	CmdSetLimit    // limit.go
	CmdClearLimit  // limit.go
	CmdSetRate     // limit.go
	CmdClearRate   // limit.go
	numCmds
)

var cmdNames = [numCmds]string{"invalid", "submit", "claim", "extend", "ack", "nak", "term", "cancel", "retry", "expire", "pause", "resume", "sweep", "batch", "schedule", "schedule-set", "fire",
	"set-limit", "clear-limit", "set-rate", "clear-rate"}

func (t CommandType) String() string {
	if t < numCmds {
		return cmdNames[t]
	}
	return fmt.Sprintf("cmd(%d)", uint8(t))
}

// Command is one of the typed commands below; EncodeCommand turns it into
// the bytes of one raft entry.
type Command interface {
	Type() CommandType
}

// SubmitCmd submits a batch of jobs in one entry. Each job gets its own
// outcome (created, duplicate or rejected); one bad job does not refuse the
// others. With Batch, the jobs it creates are one batch (deps.go).
type SubmitCmd struct {
	Jobs  []NewJob
	Batch *BatchSpec
}

// ClaimCmd leases up to Max ready jobs from the listed queues to Worker for
// TTL, best first across the queues by the ready order (priority desc,
// run-at, submit sequence). Paused queues are skipped. Kinds, when not
// empty, limits the claim to jobs of those kinds (a worker's handlers):
// jobs of other kinds are neither leased nor passed over in any way, they
// stay where they are for a claim that names their kind or none.
type ClaimCmd struct {
	Queues []string
	Worker string
	Max    uint32
	TTL    time.Duration
	Kinds  []string
	// ID, when set, names the claim (1..MaxNameLen bytes, unique per
	// claim: a client's retry of one claim reuses it). A claim whose ID
	// names leases that are still running is a repeat: it answers those
	// leases (Result.Changed false) and leases nothing more, so a claim
	// retried after an unknown outcome never leases a job to nobody.
	ID string
}

// ExtendCmd pushes a lease's deadline to entry time + TTL (0: the lease's
// TTL). A heartbeat: NATS "in progress".
type ExtendCmd struct {
	ID    string
	Token uint64
	TTL   time.Duration
}

// AckCmd completes a running job successfully, storing Result.
//
// Ack, nak and term are idempotent per request: one whose lease already
// ended by this very request (the job's LastLease names its token and
// command kind, and it asks for the same: an ack the same Result, a nak the
// same Delay and Error, a term the same Reason; see Job.EndedBy) is a
// repeat, a client's retry after a lost answer: it answers success with
// the job as it is now (Result.Changed false) and changes nothing. Any
// other command with a token that is not the job's current lease is
// refused ErrStaleLease, its detail saying how that lease ended: another
// ack of the lease with another result (a second worker's, say), an older
// lease, or one that ended otherwise stays fenced. So of two different
// acks of one lease, exactly one succeeds, and the job holds its result.
type AckCmd struct {
	ID     string
	Token  uint64
	Result []byte
}

// NakCmd fails the current attempt: the job waits Delay (0: its backoff
// policy) and becomes claimable again, or goes dead when out of attempts.
// Idempotent per request as AckCmd (the same Delay as given and Error;
// their digest, Sum, is kept with the lease end), while its lease is the
// job's last ended one (a later lease of the job that ended since makes it
// stale).
type NakCmd struct {
	ID    string
	Token uint64
	Delay time.Duration
	Error string
}

// TermCmd fails a running job permanently (dead), whatever attempts remain.
// Idempotent per request as NakCmd (the same Reason).
type TermCmd struct {
	ID     string
	Token  uint64
	Reason string
}

// CancelCmd cancels a pending, scheduled or running job. Canceling a running
// job fences its lease: the worker's ack/nak/extend/term get ErrStaleLease.
type CancelCmd struct {
	ID     string
	Reason string
}

// RetryCmd moves a dead or canceled job back to pending with a fresh
// attempt budget (attempts reset to 0).
type RetryCmd struct{ ID string }

// ExpireCmd is proposed by the leader to expire leases whose deadline has
// passed. LeaderSince is the proposing leader's own clock when it took
// office; a lease granted in an earlier term expires only once the leader
// has been in office for its whole TTL both by its stamps since LeaderSince
// and by log time since the term's first entry, so a new leader never
// expires a lease before a full TTL elapsed on its own clock (see
// docs/jobs.md). Term, when set, is the term the leader proposed it in: an
// entry appended in another term (leadership lost and regained between the
// proposer's check and the append) is refused, so a LeaderSince is never
// paired with another term's entry.
type ExpireCmd struct {
	LeaderSince time.Time
	Term        uint64
}

// PauseCmd pauses a queue: claims skip it. Pausing an unknown queue creates
// it paused.
type PauseCmd struct{ Queue string }

// ResumeCmd resumes a paused queue.
type ResumeCmd struct{ Queue string }

// SweepCmd removes terminal jobs (with their idempotency keys): those
// finished at least MaxAge before the entry time (0: no age limit), then in
// every queue the oldest beyond MaxPerQueue (0: no count limit).
type SweepCmd struct {
	MaxAge      time.Duration
	MaxPerQueue uint32
}

// Type implementations.
func (SubmitCmd) Type() CommandType { return CmdSubmit }
func (ClaimCmd) Type() CommandType  { return CmdClaim }
func (ExtendCmd) Type() CommandType { return CmdExtend }
func (AckCmd) Type() CommandType    { return CmdAck }
func (NakCmd) Type() CommandType    { return CmdNak }
func (TermCmd) Type() CommandType   { return CmdTerm }
func (CancelCmd) Type() CommandType { return CmdCancel }
func (RetryCmd) Type() CommandType  { return CmdRetry }
func (ExpireCmd) Type() CommandType { return CmdExpire }
func (PauseCmd) Type() CommandType  { return CmdPause }
func (ResumeCmd) Type() CommandType { return CmdResume }
func (SweepCmd) Type() CommandType  { return CmdSweep }

// validation (shared by EncodeCommand and Apply)

func checkName(what, s string) *refusal {
	if s == "" {
		return refuse(CodeInvalidCommand, "empty %s", what)
	}
	if len(s) > MaxNameLen {
		return refuse(CodeTooLarge, "%s of %d bytes (max %d)", what, len(s), MaxNameLen)
	}
	return nil
}

func checkID(id string) *refusal {
	if id == "" {
		return refuse(CodeInvalidCommand, "empty job id")
	}
	if len(id) > MaxIDLen {
		return refuse(CodeTooLarge, "job id of %d bytes (max %d)", len(id), MaxIDLen)
	}
	return nil
}

func checkMsg(what string, n, max int) *refusal {
	if n > max {
		return refuse(CodeTooLarge, "%s of %d bytes (max %d)", what, n, max)
	}
	return nil
}

func checkTTL(ttl time.Duration, zeroOK bool) *refusal {
	if (ttl == 0 && !zeroOK) || ttl < 0 || ttl > MaxLeaseTTL {
		return refuse(CodeInvalidCommand, "lease ttl %v out of (0, %v]", ttl, MaxLeaseTTL)
	}
	return nil
}

func (nj *NewJob) validate() *refusal {
	if nj.ID != "" {
		if r := checkID(nj.ID); r != nil {
			return r
		}
		if nj.ID[0] == '@' {
			return refuse(CodeInvalidCommand, "job id %q uses the reserved '@' prefix", nj.ID)
		}
	}
	if r := checkName("queue", nj.Queue); r != nil {
		return r
	}
	if r := checkName("kind", nj.Kind); r != nil {
		return r
	}
	if len(nj.Payload) > MaxPayload {
		return refuse(CodeTooLarge, "payload of %d bytes (max %d)", len(nj.Payload), MaxPayload)
	}
	if len(nj.IdempotencyKey) > MaxKeyLen {
		return refuse(CodeTooLarge, "idempotency key of %d bytes (max %d)", len(nj.IdempotencyKey), MaxKeyLen)
	}
	if nj.MaxAttempts > MaxAttempts {
		return refuse(CodeInvalidCommand, "max attempts %d above %d", nj.MaxAttempts, MaxAttempts)
	}
	if r := nj.validateDeps(); r != nil {
		return r
	}
	if nj.Unique != nil {
		if r := nj.Unique.validate(); r != nil {
			return r
		}
	}
	return nj.Backoff.validate()
}

// validate checks a command's fields. Submit jobs are checked one by one at
// apply time (a bad job does not refuse the batch), so here only the batch
// shape is checked unless all is set.
func validate(c Command, all bool) *refusal {
	switch c := c.(type) {
	case *SubmitCmd:
		if len(c.Jobs) == 0 {
			return refuse(CodeInvalidCommand, "empty submit batch")
		}
		if len(c.Jobs) > MaxSubmit {
			return refuse(CodeTooLarge, "submit batch of %d jobs (max %d)", len(c.Jobs), MaxSubmit)
		}
		if r := c.Batch.validate(); r != nil {
			return r
		}
		if all {
			for i := range c.Jobs {
				if r := c.Jobs[i].validate(); r != nil {
					r.detail = fmt.Sprintf("job %d: %s", i, r.detail)
					return r
				}
			}
		}
	case *ClaimCmd:
		if len(c.Queues) == 0 {
			return refuse(CodeInvalidCommand, "claim names no queue")
		}
		if len(c.Queues) > MaxClaimQueue {
			return refuse(CodeTooLarge, "claim names %d queues (max %d)", len(c.Queues), MaxClaimQueue)
		}
		for _, q := range c.Queues {
			if r := checkName("queue", q); r != nil {
				return r
			}
		}
		if r := checkName("worker", c.Worker); r != nil {
			return r
		}
		if c.Max == 0 || c.Max > MaxClaim {
			return refuse(CodeInvalidCommand, "claim max %d out of [1, %d]", c.Max, MaxClaim)
		}
		if len(c.Kinds) > MaxClaimKinds {
			return refuse(CodeTooLarge, "claim names %d kinds (max %d)", len(c.Kinds), MaxClaimKinds)
		}
		for _, k := range c.Kinds {
			if r := checkName("kind", k); r != nil {
				return r
			}
		}
		if c.ID != "" {
			if r := checkName("claim id", c.ID); r != nil {
				return r
			}
		}
		return checkTTL(c.TTL, false)
	case *ExtendCmd:
		if r := checkID(c.ID); r != nil {
			return r
		}
		return checkTTL(c.TTL, true)
	case *AckCmd:
		if r := checkID(c.ID); r != nil {
			return r
		}
		return checkMsg("result", len(c.Result), MaxResult)
	case *NakCmd:
		if r := checkID(c.ID); r != nil {
			return r
		}
		if c.Delay < 0 || c.Delay > MaxDelay {
			return refuse(CodeInvalidCommand, "nak delay %v out of [0, %v]", c.Delay, MaxDelay)
		}
		return checkMsg("error", len(c.Error), MaxMessage)
	case *TermCmd:
		if r := checkID(c.ID); r != nil {
			return r
		}
		return checkMsg("reason", len(c.Reason), MaxMessage)
	case *CancelCmd:
		if r := checkID(c.ID); r != nil {
			return r
		}
		return checkMsg("reason", len(c.Reason), MaxMessage)
	case *RetryCmd:
		return checkID(c.ID)
	case *ExpireCmd:
		if c.LeaderSince.IsZero() {
			return refuse(CodeInvalidCommand, "expire without leader-since")
		}
	case *PauseCmd:
		return checkName("queue", c.Queue)
	case *ResumeCmd:
		return checkName("queue", c.Queue)
	case *BatchCmd:
		return validateBatch(c, all)
	case *ScheduleCmd, *ScheduleSetCmd, *FireCmd:
		return validateSchedule(c)
	case *SweepCmd:
		if c.MaxAge < 0 {
			return refuse(CodeInvalidCommand, "sweep max age %v negative", c.MaxAge)
		}
	case *SetLimitCmd, *ClearLimitCmd, *SetRateCmd, *ClearRateCmd:
		return validateLimit(c)
	default:
		return refuse(CodeUnknownCommand, "command %T", c)
	}
	return nil
}
