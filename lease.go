package jobraft

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Lease is a claimed job. Its fencing token is the raft index of the claim:
// Ack, Nak, Extend and Term carry it, and the state machine refuses them
// with ErrStaleLease once the lease is no longer the job's current one.
// A Lease may be used from any goroutine.
type Lease struct {
	// Job is the job as claimed, payload included.
	Job   Job
	Token uint64
	c     *Controller
	// deadline is unix nanoseconds in the log's time.
	deadline atomic.Int64
}

// Deadline returns the lease's deadline in the log's time (the leader's
// clock, never going backwards: see docs/jobs.md "The log's time"), as of
// the claim or the last successful Extend. It can be ahead of this
// process's clock by the clocks' offset: count a lease's time left from when
// it was granted or extended (as Run does, extending every TTL/3), not from
// Deadline.
func (l *Lease) Deadline() time.Time { return time.Unix(0, l.deadline.Load()) }

// LeaseOf returns a lease handle for job under token, e.g. for a worker that
// kept only the job ID and token (across a process boundary). It carries no
// authority beyond the token: the state machine checks it on every use.
func (c *Controller) LeaseOf(job Job, token uint64) *Lease {
	l := &Lease{Job: job, Token: token, c: c}
	if job.Lease != nil {
		l.deadline.Store(job.Lease.Deadline.UnixNano())
	}
	return l
}

// Ack completes the job successfully with result (at most fsm.MaxResult
// bytes). nil: the job succeeded under this lease with this result, by
// this call or by an earlier Ack of this lease with the same result (a
// repeat of the very request, e.g. a client's retry after a lost answer,
// succeeds and changes nothing). ErrStaleLease: the lease was lost
// (expired and reclaimed, job canceled, finished otherwise, or acked with
// another result: of two different acks of one lease exactly one
// succeeds); the error says how the lease ended, nothing changed, and the
// job's fate belongs to whoever ended it. An attempt whose outcome was
// unknown is retried with the same request; a retry refused as stale is
// resolved by a linearizable read: the job's LastLease, if it is this
// lease's, says whether this request ended it (Job.EndedBy); otherwise a
// later lease ended since, and the retained event history can only show
// that this lease ended otherwise (the refusal stands).
// ErrOutcomeUnknown (and nothing else) if it cannot tell. Every error is
// of exactly one outcome class.
func (l *Lease) Ack(ctx context.Context, result []byte) error {
	cmd := &fsm.AckCmd{ID: l.Job.ID, Token: l.Token, Result: result}
	_, err := l.c.applyResolving(ctx, cmd, l.Job.ID, l.resolver(cmd, EventAcked, fsm.EndAcked, 0))
	return err
}

// Nak fails this attempt: the job is scheduled again after delay (0: its
// backoff policy), or goes dead when out of attempts. errMsg is recorded as
// the job's LastError (truncated to fsm.MaxMessage bytes). Idempotent per
// request as Ack (the same delay, as given, and errMsg) while this lease is
// the last of the job that ended (a repeat after the job's next lease
// ended is stale). Errors as Ack.
func (l *Lease) Nak(ctx context.Context, delay time.Duration, errMsg string) error {
	errMsg = truncate(errMsg, fsm.MaxMessage)
	cmd := &fsm.NakCmd{ID: l.Job.ID, Token: l.Token, Delay: delay, Error: errMsg}
	_, err := l.c.applyResolving(ctx, cmd, l.Job.ID, l.resolver(cmd, EventNaked, fsm.EndNaked, cmd.Sum()))
	return err
}

// Term fails the job permanently (dead), whatever attempts remain.
// Idempotent per request as Nak (the same reason). Errors as Ack.
func (l *Lease) Term(ctx context.Context, reason string) error {
	reason = truncate(reason, fsm.MaxMessage)
	cmd := &fsm.TermCmd{ID: l.Job.ID, Token: l.Token, Reason: reason}
	_, err := l.c.applyResolving(ctx, cmd, l.Job.ID, l.resolver(cmd, EventTermed, fsm.EndTermed, cmd.Sum()))
	return err
}

// Extend pushes the lease's deadline to the log's time + the lease TTL
// and updates Deadline. ErrStaleLease: the lease is lost; stop working on
// the job (also when an earlier attempt's outcome was unknown: whether it
// applied no longer matters). Retrying an extend is harmless, so unknown
// outcomes are retried while ctx allows.
func (l *Lease) Extend(ctx context.Context) error {
	r, err := l.c.applyResolving(ctx, &fsm.ExtendCmd{ID: l.Job.ID, Token: l.Token}, l.Job.ID, nil)
	if err == nil && len(r.Jobs) == 1 && r.Jobs[0].Lease != nil {
		l.deadline.Store(r.Jobs[0].Lease.Deadline.UnixNano())
	}
	return err
}

// resolver settles an unknown Ack/Nak/Term attempt (cmd, ending the
// lease by kind by; sum its request sum, 0 for an ack) whose retry was
// refused. The retry is the same request, so had the attempt applied, the
// retry would have been answered as its repeat, unless the job forgot the
// end since. The job's state alone cannot tell: Retry resets Attempts, so
// another lease of the same job may have reached the very same state
// since. If the job's LastLease is this lease's, it says how the lease
// ended: by this very request (Job.EndedBy: success is the truth at the
// read, where a repeat would change nothing) or not (another kind of end, or another request of
// this kind: another result, delay, error or reason); a nak's or term's
// end without a recorded sum cannot tell. Otherwise a later lease ended
// since, and the event that ended this lease (the first after the claim
// at Token) can only show that the attempt never applied: when it is
// another kind of end, or a nak or term with another request sum. An end
// by a request like this one proves nothing: it may be this attempt's, or
// an earlier call's after which the later lease ended before this call
// began (this attempt, had it applied, was refused stale; chaos seeds 13
// and 26, TestUnknownNakRepeatAfterALaterLeaseEndedIsNotSuccess). Then,
// and when the history that would say is no longer retained, the outcome
// stays unknown.
func (l *Lease) resolver(cmd fsm.Command, kind EventKind, by fsm.EndKind, sum uint64) func(Job) (applied, known bool) {
	return func(j Job) (bool, bool) {
		if e := j.LastLease; e != nil && e.Token == l.Token {
			switch {
			case j.EndedBy(cmd):
				return true, true
			case e.By == by && by != fsm.EndAcked && e.Sum == 0:
				return false, false // a nak or term not recorded: it may be this one
			}
			return false, true // ended otherwise, or by another request: not this one
		}
		end, endSum, ok := l.c.rec.LeaseEnd(l.Job.ID, l.Token)
		switch {
		case !ok:
			return false, false
		case end != kind:
			return false, true // the lease ended otherwise: this attempt never applied
		case sum != 0 && endSum != 0 && endSum != sum:
			return false, true // ended by another nak or term: not this one
		}
		return false, false // ended by a request like this one: this call's, or an earlier one's
	}
}
