package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jobraft/jobraft/raft"
)

// This file is the one definition of jobd's JSON wire format: jobd
// (examples/jobd) serves and accepts these types, the client sends and
// decodes them. A field here is a field on the wire; its order is the order
// jobd writes (the golden replies in examples/jobd/testdata/wire pin both,
// TestWireFormatGoldens in jobd and TestGoldensRoundTrip here).

// Job is a job as jobd returns it. Payload and Result are the bytes (base64
// on the wire); PayloadText and ResultText are the same bytes as text, given
// when they are valid UTF-8 (and not empty).
type Job struct {
	ID             string     `json:"id"`
	Queue          string     `json:"queue"`
	Kind           string     `json:"kind"`
	Payload        []byte     `json:"payload,omitempty"`
	PayloadText    string     `json:"payload_text,omitempty"`
	Priority       int32      `json:"priority"`
	RunAt          *time.Time `json:"run_at,omitempty"`
	MaxAttempts    uint32     `json:"max_attempts"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	Attempts       uint32     `json:"attempts"`
	State          string     `json:"state"` // pending, scheduled, running, succeeded, dead, canceled, waiting
	Lease          *Lease     `json:"lease,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	Result         []byte     `json:"result,omitempty"`
	ResultText     string     `json:"result_text,omitempty"`
	Created        time.Time  `json:"created"`
	Updated        time.Time  `json:"updated"`
	Finished       *time.Time `json:"finished,omitempty"`
	// Parents (After), those not yet succeeded (Unmet), the policy on a
	// parent's failure, and the job's batch.
	After           []string `json:"after,omitempty"`
	Unmet           []string `json:"unmet,omitempty"`
	OnParentFailure string   `json:"on_parent_failure,omitempty"`
	Batch           string   `json:"batch,omitempty"`
	Unique          *Unique  `json:"unique,omitempty"`
}

// Lease is a running job's lease.
type Lease struct {
	Token    uint64    `json:"token"`
	Worker   string    `json:"worker"`
	Deadline time.Time `json:"deadline"`
}

// Duration is a duration on the wire: written "1.5s"; read from such a
// string or from a number of seconds. A negative number of seconds stays
// negative however small (jobd refuses negative durations); one beyond
// time.Duration's range is refused.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("a duration is a string like \"1.5s\" or a number of seconds")
	}
	ns := math.Round(f * float64(time.Second))
	switch {
	case math.Abs(ns) >= math.MaxInt64:
		return fmt.Errorf("duration of %g seconds is out of range", f)
	case f < 0 && ns == 0:
		ns = -1
	}
	*d = Duration(ns)
	return nil
}

// SubmitRequest is one job to submit (POST /v1/jobs, or one of the jobs
// of POST /v1/jobs/batch). An empty ID is filled with NewID before the
// first attempt, so that retries are exactly-once.
type SubmitRequest struct {
	ID             string     `json:"id"`
	Queue          string     `json:"queue"`
	Kind           string     `json:"kind"`
	Payload        []byte     `json:"payload,omitempty"`
	Priority       int32      `json:"priority,omitempty"`
	Delay          Duration   `json:"delay,omitempty"`
	RunAt          *time.Time `json:"run_at,omitempty"`
	MaxAttempts    uint32     `json:"max_attempts,omitempty"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	// After names the job's parents: it waits until every one succeeded;
	// OnParentFailure ("cancel", the default, or "dead") is what a
	// parent's failure does to it.
	After           []string `json:"after,omitempty"`
	OnParentFailure string   `json:"on_parent_failure,omitempty"`
	// Unique makes the job unique by (queue, kind, payload) within a
	// period and among states: a submit whose key a job holds answers
	// that job as a duplicate.
	Unique *UniqueOpts `json:"unique,omitempty"`
}

// UniqueOpts are a submit's unique options: Period (0: none) splits log
// time into windows, one job per key per window; States are the states
// in which a job holds its key (names as Job.State): pending, scheduled,
// running and waiting always, with those of succeeded, dead and canceled
// named (empty: succeeded too).
type UniqueOpts struct {
	Period Duration `json:"period,omitempty"`
	States []string `json:"states,omitempty"`
}

// Unique is a unique job's key: its period, chosen states, the start of
// its period window (none without a period) and whether the job still
// holds it (false for good once it left the chosen states).
type Unique struct {
	Period Duration   `json:"period,omitempty"`
	States []string   `json:"states"`
	Window *time.Time `json:"window,omitempty"`
	Held   bool       `json:"held"`
}

// Submitted is a submit's outcome (POST /v1/jobs; one result of a batch).
type Submitted struct {
	Job Job `json:"job"`
	// Duplicate: the job existed before this call's last attempt (submitted
	// before, or by an earlier attempt of this call whose outcome was
	// unknown: see Retried).
	Duplicate bool `json:"duplicate"`
	// Retried: the call resubmitted after an unknown outcome.
	Retried bool `json:"-"`
	// Per-job error in a batch ("" if none), as jobd names it.
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// BatchRequest is POST /v1/jobs/batch's body: 1 to 1000 jobs.
type BatchRequest struct {
	Jobs []SubmitRequest `json:"jobs"`
}

// BatchReply is POST /v1/jobs/batch's reply: one result a job, in order.
type BatchReply struct {
	Results []Submitted `json:"results"`
}

// JobPage is one page of a listing (GET /v1/jobs); Next is "" on the last
// page.
type JobPage struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next"`
}

// CancelRequest is POST /v1/jobs/{id}/cancel's body.
type CancelRequest struct {
	Reason string `json:"reason"`
}

// ClaimRequest asks for up to Max jobs of Queues for Worker (POST
// /v1/claim); Wait long-polls (at most 60s) when none is claimable.
type ClaimRequest struct {
	Queues   []string `json:"queues"`
	Worker   string   `json:"worker"`
	Max      int      `json:"max,omitempty"`
	LeaseTTL Duration `json:"lease_ttl,omitempty"`
	Wait     Duration `json:"wait,omitempty"`
}

// Claimed is one leased job: settle it with Ack, Nak, Extend or Term
// giving its Token.
type Claimed struct {
	Job      Job       `json:"job"`
	Token    uint64    `json:"token"`
	Deadline time.Time `json:"deadline"`
}

// ClaimReply is POST /v1/claim's reply.
type ClaimReply struct {
	Leases []Claimed `json:"leases"`
}

// SettleRequest is the body of POST /v1/jobs/{id}/ack, nak, extend and
// term: the lease's token, and what the operation takes (ack: Result; nak:
// Delay, Error; term: Reason).
type SettleRequest struct {
	Token  uint64   `json:"token"`
	Result []byte   `json:"result,omitempty"`
	Delay  Duration `json:"delay,omitempty"`
	Error  string   `json:"error,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Settled is the reply of ack, nak, extend and term: the job, its state
// read after the operation (linearizable; "" when that read failed: the
// operation itself succeeded), the token, and after extend the lease's new
// deadline (ack, nak and term end the lease: no deadline).
type Settled struct {
	Deadline time.Time `json:"deadline,omitzero"`
	ID       string    `json:"id"`
	State    string    `json:"state,omitempty"`
	Token    uint64    `json:"token"`
}

// QueueState is the reply of POST /v1/queues/{queue}/pause and /resume.
type QueueState struct {
	Paused bool   `json:"paused"`
	Queue  string `json:"queue"`
}

// QueueStats is one queue's job counts by state, and by kind those
// waiting for a worker.
type QueueStats struct {
	Counts map[string]int `json:"counts"`
	Name   string         `json:"name"`
	Paused bool           `json:"paused"`
	Kinds  []KindStats    `json:"kinds,omitempty"`
}

// KindStats counts one kind's pending and scheduled jobs in a queue.
type KindStats struct {
	Kind      string `json:"kind"`
	Pending   int    `json:"pending"`
	Scheduled int    `json:"scheduled"`
}

// Unserved is a queue and kind whose jobs waited at least jobd's
// -unserved-after with no job of that queue and kind claimed, as the
// answering member observed it (it counts from its own start): no worker
// serves the kind, or every one that does is busy. Pending counts its
// pending jobs; DueScheduled says scheduled ones are due too; Since is
// when it began to wait unclaimed.
type Unserved struct {
	Queue        string    `json:"queue"`
	Kind         string    `json:"kind"`
	Pending      int       `json:"pending"`
	DueScheduled bool      `json:"due_scheduled,omitempty"`
	Since        time.Time `json:"since"`
	Hint         string    `json:"hint"`
}

// Stats is GET /v1/stats (linearizable).
type Stats struct {
	AppliedIndex uint64       `json:"applied_index"`
	Jobs         int          `json:"jobs"`
	Leader       string       `json:"leader"`
	Member       string       `json:"member"`
	Queues       []QueueStats `json:"queues"`
	Role         string       `json:"role"`
	// BatchHolds counts the times the answering member's next entries
	// waited for the callers of one just answered (jobraft's
	// Config.BatchHold), BatchHoldsExpired those that ran out before the
	// callers were back.
	BatchHolds        uint64 `json:"batch_holds"`
	BatchHoldsExpired uint64 `json:"batch_holds_expired"`
	// SubmitEntries and SubmittedJobs count the answering member's submit
	// entries and the jobs they carried since it started.
	SubmitEntries uint64 `json:"submit_entries"`
	SubmittedJobs uint64 `json:"submitted_jobs"`
	Term          uint64 `json:"term"`
	// Unserved lists the queues and kinds whose jobs wait with no claim
	// (see Unserved); empty when there is none.
	Unserved []Unserved `json:"unserved,omitempty"`
	// Limits are the queues' limits (empty when none has one).
	Limits []QueueLimits `json:"limits,omitempty"`
	// WatchOldest is the oldest index a watch can start from on the
	// answering member.
	WatchOldest uint64 `json:"watch_oldest"`
}

// Event is one committed job event from GET /v1/watch.
type Event struct {
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // submitted, claimed, acked, naked, ...
	JobID   string    `json:"job,omitempty"`
	Queue   string    `json:"queue,omitempty"`
	JobKind string    `json:"job_kind,omitempty"`
	State   string    `json:"state,omitempty"`
	Attempt uint32    `json:"attempt,omitempty"`
	Token   uint64    `json:"token,omitempty"`
	Worker  string    `json:"worker,omitempty"`
	Removed uint64    `json:"removed,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Status is one member's raft status (raft.Status) with its state digest
// in hex and its readiness.
type Status struct {
	raft.Status
	// Digest is the state digest's sum in hex (on the wire it replaces
	// raft.Status's digest object; DigestIndex is its index).
	Digest      string `json:"digest"`
	DigestIndex uint64 `json:"digest_index"`
	// Ready: a leader is known, the member has not diverged, its log has
	// not failed, it was not removed, and it applied everything up to the
	// leader's commit index (LeaderCommitIndex; for another member
	// answered for: up to its own commit index, and the leader's catch-up
	// monitor names it caught up).
	Ready bool `json:"ready"`
	// LeaderCommitIndex is the leader's commit index this member read to
	// decide it is ready (its read index; 0 when it could not: no leader
	// reached). Only for the answering member itself.
	LeaderCommitIndex uint64 `json:"leader_commit_index,omitempty"`
}

// Member is one member of the configuration, with its status as the
// answering member got it (Error when it could not).
type Member struct {
	ID      string  `json:"id"`
	Address string  `json:"address"`
	Voter   bool    `json:"voter"`
	Status  *Status `json:"status,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Lag is how many entries the member's log is behind the answering
	// member's last index (meaningful when the answering member leads).
	Lag uint64 `json:"lag"`
}

// ClusterStatus is GET /v1/cluster/status: the answering member and
// (unless asked for itself only) every member.
type ClusterStatus struct {
	Members []Member `json:"members,omitzero"`
	Self    Status   `json:"self"`
}

// MemberInfo is one member in GET /v1/cluster/members: its suffrage, and
// its role and catch-up state as the leader's catch-up policy sees it
// (raft.MemberProgress; empty when no leader answered).
type MemberInfo struct {
	ID                     string  `json:"id"`
	Address                string  `json:"address"`
	Suffrage               string  `json:"suffrage"` // voter, nonvoter
	Role                   string  `json:"role,omitempty"`
	State                  string  `json:"state,omitempty"` // leader, caught_up, catching_up, stalled, diverged
	Reason                 string  `json:"reason,omitempty"`
	Detail                 string  `json:"detail,omitempty"`
	LastIndex              uint64  `json:"last_index"`
	Lag                    uint64  `json:"lag"`
	Round                  int     `json:"round,omitempty"`
	EntriesPerSecond       float64 `json:"entries_per_second"`
	BytesPerSecond         float64 `json:"bytes_per_second"`
	SnapshotBytesRemaining uint64  `json:"snapshot_bytes_remaining,omitempty"`
	// ETASeconds estimates when it holds the leader's log (-1: unknown).
	ETASeconds float64 `json:"eta_seconds"`
	// Add is the add the answering member's API started for it, if any.
	Add *MemberAdd `json:"add,omitempty"`
}

// MemberAdd is an add started through a member's API (POST
// /v1/cluster/members).
type MemberAdd struct {
	State   string    `json:"state"` // pending, promoted, failed
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
}

// Membership is GET /v1/cluster/members.
type Membership struct {
	ClusterID string       `json:"cluster_id"`
	Leader    string       `json:"leader"`
	Members   []MemberInfo `json:"members"`
}

// MemberRequest is POST /v1/cluster/members's body: the member to add.
type MemberRequest struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// ErrorReply is the body of every error reply: jobd's error kind and its
// reason (Error.Code and Error.Reason).
type ErrorReply struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// MemberAdded is POST /v1/cluster/members's reply: the member and its
// suffrage; Message says how it goes on (202: it joined as a non-voter).
type MemberAdded struct {
	Address  string `json:"address"`
	ID       string `json:"id"`
	Message  string `json:"message,omitempty"`
	Suffrage string `json:"suffrage"`
}

// MemberRemoved is DELETE /v1/cluster/members/{id}'s reply.
type MemberRemoved struct {
	Removed string `json:"removed"`
}

// LimitRequest is POST /v1/queues/{queue}/limit's body: the concurrency
// limit of the queue (Kind empty) or of one kind of it, 1 .. 2^32-1 (0
// is refused: DELETE clears a limit).
type LimitRequest struct {
	Kind string `json:"kind,omitempty"`
	Max  int64  `json:"max"`
}

// RateRequest is POST /v1/queues/{queue}/rate's body: PerSecond jobs per
// second (above 0), in bursts of at most Burst (0: 1).
type RateRequest struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

// QueueLimits is one queue's limits: its concurrency limit (Max, 0: none)
// with its running jobs, its kinds' limits, its rate, and how many claims
// a concurrency limit (Limited) or the rate (RateLimited) held back.
type QueueLimits struct {
	Queue       string      `json:"queue"`
	Max         uint32      `json:"max,omitempty"`
	Running     int         `json:"running"`
	Kinds       []KindLimit `json:"kinds,omitempty"`
	Rate        *Rate       `json:"rate,omitempty"`
	Limited     uint64      `json:"limited"`
	RateLimited uint64      `json:"rate_limited"`
	// Unread: the reply of a change that succeeded but whose limits could
	// not be read after it (the rest is empty).
	Unread bool `json:"unread,omitempty"`
}

// KindLimit is one kind's concurrency limit in a queue.
type KindLimit struct {
	Kind    string `json:"kind"`
	Max     uint32 `json:"max"`
	Running int    `json:"running"`
}

// Rate is a queue's rate: a token every Every (PerSecond a second), at
// most Burst at once; Tokens is what the bucket holds now.
type Rate struct {
	PerSecond float64  `json:"per_second"`
	Every     Duration `json:"every"`
	Burst     uint32   `json:"burst"`
	Tokens    uint32   `json:"tokens"`
}

// LimitsReply is GET /v1/limits: every queue with a limit, in name order.
type LimitsReply struct {
	Limits []QueueLimits `json:"limits"`
}
