// Package fsm is the job state machine (Jobs). It rides on a jobraft node
// through the controller, which adapts it to raft.StateMachine (the contract
// package raft owns); fsm itself depends on no part of raft.
//
// # The caller's contract (what raft.Node does)
//
//  1. Apply is called once per committed command entry, in index order, never
//     concurrently with Snapshot or Restore.
//  2. Entry.Time is the proposing leader's clock (its stamp); no other time
//     source exists inside Apply. Jobs runs on a log clock derived from the
//     stamps (clock.go): it never goes backwards, and within a term it
//     never runs faster than the leader's clock.
//  3. Snapshot is taken on the apply goroutine; Persist then runs on another
//     goroutine while Apply continues.
//  4. Restore is given a stream that a Snapshot of the same state machine
//     type produced; it must verify the stream before replacing anything.
//
// # Jobs: what the controller does
//
//  1. Build a typed command (SubmitCmd, ClaimCmd, ExtendCmd, AckCmd, NakCmd,
//     TermCmd, CancelCmd, RetryCmd, ExpireCmd, PauseCmd, ResumeCmd,
//     SweepCmd, ScheduleCmd, ScheduleSetCmd, FireCmd, SetLimitCmd,
//     ClearLimitCmd, SetRateCmd, ClearRateCmd, or a BatchCmd of lease
//     commands) and encode it with
//     EncodeCommand (or EncodeBatch over encoded lease commands); propose
//     the bytes as one raft entry. EncodeCommand refuses what Apply would refuse for
//     stateless reasons (sizes, ranges), with the same sentinel errors.
//  2. Decode what Apply returned with DecodeResult. Result.Err is nil when
//     the command applied, else wraps a sentinel of errors.go (errors.Is):
//     ErrStaleLease tells a worker to drop its job, ErrNotFound that the job
//     is gone, and so on. A submit answers per job (Result.Submitted):
//     created, duplicate (the existing job) or rejected (with a code).
//  3. Give every job an ID or an IdempotencyKey when a submit may be retried
//     after an indeterminate failure: a resubmission is then answered
//     "duplicate" with the existing job and can never create a second one.
//     Jobs without an ID get one derived from the entry index.
//  4. As leader, propose ExpireCmd periodically with LeaderSince = your own
//     clock when you took office, and SweepCmd with the retention policy.
//     Leases never expire by themselves.
//  5. Truncate worker error strings to MaxMessage before proposing.
//  6. Resolve a schedule's zone with LoadZone before a ScheduleCmd (the
//     rules ride in the command); as leader, propose FireCmd when
//     ScheduleDue says a tick is due.
//
// # Guarantees
//
//   - Determinism: Apply reads no clock, no randomness and no map order; two
//     instances that applied the same entries hold the same state and report
//     the same Digest after every entry.
//   - Refusals change nothing but the log position, the applied index and
//     the log clock (an undecodable, malformed, oversize or invalid
//     command, an unknown job, a stale token). Apply never panics on its
//     input.
//   - Time: every job time is a log time; once a job is due it stays due,
//     whatever the next leader's clock says. A schedule's tick fires when
//     the log's time reaches it, once: its job's ID is the schedule's and
//     the tick's (ScheduleJobID), and Apply fires what is due at the
//     entry's log time (schedule_apply.go, docs/schedules.md). LogTime translates a reading
//     of the leader's clock; Claimable, LeaseDue and Sweepable take one.
//   - Fencing: a lease token is the raft index of the claim entry, so it is
//     unique; ack, nak, extend and term must carry the job's current token.
//   - Idempotent finishes, truthful answers: an ack, nak or term whose
//     token's lease already ended by that very request (the same kind of
//     command, and the same result for an ack, the same delay and error for
//     a nak, the same reason for a term; Job.LastLease, Job.EndedBy)
//     answers OK with Result.Changed false and changes nothing, so a client
//     may repeat one whose answer it lost. Any other request under an ended
//     token is ErrStaleLease, its detail saying how that lease ended
//     (acked, naked, termed, expired, canceled, superseded), never with the
//     requests' bytes: of two different acks of one lease, exactly one
//     succeeds.
//   - Expiry safety under clock skew: see ExpireCmd and docs/jobs.md.
//   - Dependencies and batches (NewJob.After, SubmitCmd.Batch): a job
//     waits (StateWaiting) until every parent succeeded and ends by its
//     policy in the entry a parent fails, cascading; a batch completes,
//     creating its completion job once, in the entry its last member
//     ends. What a command moved that way is in Result.Cascade and
//     Result.Completed. See deps.go, batch_group.go and
//     docs/dependencies.md.
//   - Limits (limit.go): a queue's and a kind's concurrency limit and a
//     queue's rate are enforced when a claim applies, on the running jobs
//     and the log's time, so they hold across every member and worker.
//     Unique jobs (unique.go): a submit whose (queue, kind, payload,
//     window) key a job holds is a duplicate of that job.
//   - Snapshots are O(number of paused and limited queues) to take: the job tree is a
//     copy-on-write btree clone and job records are immutable once
//     published, so Persist streams while Apply continues. Restore validates
//     the magic, version, layout, CRC-32C, record invariants and the
//     recomputed digest before swapping the new state in.
//   - Queries (Get, List, Queue, Queues, Limits, Len, AppliedIndex,
//     Digest, Claimable, Sweepable) are safe from any goroutine; each sees the
//     state after a whole entry.
//
// # Digest
//
// Every job record has a SHA-256 of its canonical encoding; the state keeps
// the lane-wise sum (4 × uint64, mod 2^64) of those hashes, updated on every
// change (subtract the old record's hash, add the new one), so it does not
// depend on any iteration order. Digest().Sum is SHA-256 over a domain tag,
// the applied index, the submit sequence, that accumulator and the names of
// paused queues, and, while batches are held, their count and the
// accumulator of their records' hashes, and the queues' limits: O(paused
// and limited queues) per call. Index structures are functions
// of the records and are not hashed separately.
//
// # Caveats
//
//   - Scheduled jobs become pending lazily: claim and expire promote every
//     due scheduled job first (sweep does not). Until then a due job is
//     listed and counted as scheduled.
//   - One claim, expire or sweep entry does work proportional to the jobs
//     it promotes, expires or removes; keep sweeps frequent.
//   - Slices in returned Jobs and Schedules are the caller's own (copies):
//     writing into them changes nothing in the state machine.
//
// docs/jobs.md has the full transition table, the encodings and the figures.
package fsm
