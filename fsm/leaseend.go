package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/internal/test/bugs"
)

// This file is how a job's last lease ended (job.end) and what makes a
// request a repeat of the one that ended it: the same command kind and
// token, and the same request. An ack's request is its result, which the
// job keeps as its Result (an acked job is succeeded for good), so it is
// compared byte for byte. A nak's (delay and error) and a term's (reason)
// are not kept as they were (a cancel replaces the last error; the delay
// is gone once the job is due), so their digest, the request sum, is kept
// with the end instead.

// leaseEnd is how a job's last lease ended. Immutable once published: a
// record's copies share it.
type leaseEnd struct {
	token uint64
	sum   uint64 // the ending nak's or term's request sum; 0 for other ends, or not recorded
	by    EndKind
}

// sumTag is the domain of request sums: never change it (sums are
// replicated state, in snapshots and the digest).
const sumTag = "jobraft/fsm request sum v1\x00"

// appendSumInput appends what a request sum digests: the tag, the kind of
// end the request makes, the nak's delay as given (0 for a term) and its
// message (a nak's error, a term's reason).
func appendSumInput(b []byte, by EndKind, delay time.Duration, msg string) []byte {
	b = append(b, sumTag...)
	b = append(b, byte(by))
	b = binary.AppendVarint(b, int64(delay))
	return appendStr(b, msg)
}

// sumOf is the request sum of the input appendSumInput made: the first 8
// bytes of its SHA-256, big endian; 1 when those are 0, as 0 means "no
// sum". A second request with the same sum takes about 2^64 tries to
// find.
func sumOf(in []byte) uint64 {
	h := sha256.Sum256(in)
	if v := binary.BigEndian.Uint64(h[:8]); v != 0 {
		return v
	}
	return 1
}

// Sum is the nak's request sum, the LeaseEnd.Sum of a lease it ends: a
// digest of its Delay as given (0, the job's backoff, is not the same
// request as the delay the backoff comes to) and its Error. Deterministic,
// never 0.
func (c NakCmd) Sum() uint64 { return sumOf(appendSumInput(nil, EndNaked, c.Delay, c.Error)) }

// Sum is the term's request sum, the LeaseEnd.Sum of a lease it ends: a
// digest of its Reason. Deterministic, never 0.
func (c TermCmd) Sum() uint64 { return sumOf(appendSumInput(nil, EndTermed, 0, c.Reason)) }

// requestSum is the request sum of a nak (by EndNaked) or term in the
// state's scratch buffer (apply goroutine only).
func (s *state) requestSum(by EndKind, delay time.Duration, msg string) uint64 {
	s.buf = appendSumInput(s.buf[:0], by, delay, msg)
	return sumOf(s.buf)
}

// sameEnd reports whether a request ending a lease of token by kind by,
// with sum (a nak or term) or result (an ack), is the one that ended e,
// the lease end of a job holding jobResult.
func sameEnd(e *leaseEnd, jobResult []byte, token uint64, by EndKind, sum uint64, result []byte) bool {
	if e == nil || e.token != token || e.by != by {
		return false
	}
	if by == EndAcked {
		return bytes.Equal(jobResult, result)
	}
	return e.sum != 0 && e.sum == sum
}

// EndedBy reports whether c, an AckCmd, NakCmd or TermCmd (or a pointer
// to one) for this job, is the request that ended the job's last lease:
// LastLease's token and kind, and the same request (an ack's Result is the
// job's Result; a nak's or term's Sum is LastLease.Sum). It is when Apply
// answers c as a repeat (success, nothing changed). False for any other
// command, and for a nak or term whose end has no Sum recorded.
func (j *Job) EndedBy(c Command) bool {
	e := j.LastLease
	if e == nil || c == nil {
		return false
	}
	end := &leaseEnd{token: e.Token, sum: e.Sum, by: e.By}
	switch c := c.(type) {
	case AckCmd:
		return c.ID == j.ID && sameEnd(end, j.Result, c.Token, EndAcked, 0, c.Result)
	case *AckCmd:
		return c != nil && j.EndedBy(*c)
	case NakCmd:
		return c.ID == j.ID && sameEnd(end, nil, c.Token, EndNaked, c.Sum(), nil)
	case *NakCmd:
		return c != nil && j.EndedBy(*c)
	case TermCmd:
		return c.ID == j.ID && sameEnd(end, nil, c.Token, EndTermed, c.Sum(), nil)
	case *TermCmd:
		return c != nil && j.EndedBy(*c)
	}
	return false
}

// leased returns the running job id whose current lease token is token,
// else refuses it (stale: saying how that lease ended).
func (s *state) leased(id string, token uint64) (*job, *refusal) {
	j := s.get(id)
	if j == nil {
		return nil, refuse(CodeNotFound, "job %q", id)
	}
	if j.state != StateRunning || (j.lease.token != token && !bugs.On("fencing")) {
		return nil, &refusal{code: CodeStaleLease, detail: staleDetail(j, token, EndNone, 0, nil)}
	}
	return j, nil
}

// ending returns the running job id whose current lease token is token,
// for the request (by; sum for a nak or term, result for an ack) to end
// it; or, when that lease already ended by this very request (a repeat: a
// client's retry after a lost answer), answers the job unchanged in r and
// returns nil, nil. Any other request whose token is not the job's
// current lease is refused stale, saying how that lease ended.
func (s *state) ending(id string, token uint64, by EndKind, sum uint64, result []byte, r *result) (*job, *refusal) {
	j := s.get(id)
	if j == nil {
		return nil, refuse(CodeNotFound, "job %q", id)
	}
	if j.state == StateRunning && (j.lease.token == token || bugs.On("fencing")) {
		r.changed = true
		return j, nil
	}
	if sameEnd(j.end, j.result(), token, by, sum, result) {
		r.jobs = append(r.jobs, j)
		return nil, nil
	}
	return nil, &refusal{code: CodeStaleLease, detail: staleDetail(j, token, by, sum, result)}
}

// staleDetail says why token is not job j's current lease: "job ID lease T
// ended: HOW", where HOW is how that lease ended (acked, naked, termed,
// expired, canceled) when it is the job's last ended lease, and
// "superseded" when the job has had a later lease; when a request (by, with
// sum or result) of the kind that ended it was refused, why it is not that
// request (lengths and sums, never the bytes). A token above every lease
// the job had or remembers is "not a lease of the job".
func staleDetail(j *job, token uint64, by EndKind, sum uint64, result []byte) string {
	if e := j.end; e != nil && e.token == token {
		d := fmt.Sprintf("job %q lease %d ended: %s", j.id, token, e.by)
		switch {
		case by != e.by:
		case by == EndAcked:
			d += fmt.Sprintf(", by another ack: the result it recorded (%d bytes) differs from this one's (%d bytes)", len(j.result()), len(result))
		case e.sum == 0:
			d += fmt.Sprintf(", by a %s whose request was not recorded (an end restored from a snapshot of version 4 or older): this one cannot be shown to repeat it", endVerb(by))
		default:
			d += fmt.Sprintf(", by another %s: its request sum %016x differs from this one's %016x", endVerb(by), e.sum, sum)
		}
		return d
	}
	var latest uint64
	if j.lease != nil {
		latest = j.lease.token
	}
	if e := j.end; e != nil && e.token > latest {
		latest = e.token
	}
	if token < latest {
		return fmt.Sprintf("job %q lease %d ended: superseded (the job's latest lease is %d, job %s)", j.id, token, latest, j.state)
	}
	return fmt.Sprintf("job %q token %d is not a lease of the job (job %s)", j.id, token, j.state)
}

// endVerb names the command that ends a lease by kind by.
func endVerb(by EndKind) string {
	switch by {
	case EndAcked:
		return "ack"
	case EndNaked:
		return "nak"
	case EndTermed:
		return "term"
	}
	return by.String()
}
