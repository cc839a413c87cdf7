// Package jobraft is an embeddable, Raft-replicated job controller. A host
// daemon opens a Controller on each of three or five members; clients
// submit jobs on any member, workers claim them under fenced leases and
// report the outcome, and every member applies the same committed job
// state (fsm.Jobs) through raft.Node.
//
// # The caller's contract
//
//  1. Open a Controller per member with a Config (the embedded raft.Config
//     names the member, its data dir, address and the initial members).
//     Close it on shutdown.
//  2. Submit (or SubmitBatch) from any member. A nil error means the job
//     exists exactly once; an error matches ErrNotSubmitted (it does not
//     exist) or ErrMayExist (outcome unknown: resubmit with the same ID).
//     Give jobs your own ID (or an IdempotencyKey) when you may resubmit
//     after a crash of your own process.
//  3. Work on jobs with Run (handlers per kind, concurrency per queue; it
//     claims only the kinds it has handlers for, and refuses a
//     configuration that cannot work with ErrInvalidConfig), or by hand:
//     Claim, then Lease.Ack / Nak / Term, and Lease.Extend before the
//     deadline for long jobs. ErrStaleLease means the lease is gone:
//     drop the job, never report it. An Ack, Nak or Term may be repeated
//     with the same token (after a lost answer): the repeat of the very
//     request that ended the lease (the same result, delay and error, or
//     reason) succeeds and changes nothing; any other is ErrStaleLease,
//     saying how the lease ended (two different acks of one lease: one
//     succeeds, the other is stale). Handlers must be
//     idempotent (a job runs at least once, more after a lost lease or a
//     crash).
//     Typed jobs carry no bytes for the host: NewKind[T](name) names a
//     kind and its argument type; Kind.Submit encodes the arguments (JSON
//     by default, Kind.WithCodec for another Codec), Kind.Handler and
//     Handle decode them for the handler (Handle encodes a typed result,
//     ResultOf reads it back). A payload that does not decode terms the
//     job with a *CodecError (ErrCodec), whose text quotes no byte.
//  4. Every error of Claim, Ack, Nak, Extend, Term, Cancel, Retry, Pause and
//     Resume matches exactly one outcome class (errors.go): nothing
//     happened (ErrNotApplied, ErrStaleLease, ErrNotFound, ErrInvalidState,
//     ErrInvalidRequest, ErrQueuePaused, ErrClosed) or it may have
//     happened (ErrOutcomeUnknown). Switch on them in any order. Without a
//     quorum they end within Config.LeaderWait (ErrNotApplied or, for
//     Submit, ErrNotSubmitted, with ErrNoLeader: nothing was applied).
//  5. Read with Get, List and Stats (linearizable by default; Local for a
//     cheap, possibly stale read) and follow changes with Watch, resuming
//     from the last index handled. Wait returns a job once it finished.
//  6. Log through hclog (raft.Config.Logger).
//
// An idle cluster writes nothing: a Claim (and so Run) proposes a claim
// only when this member's applied state (brought up to date by a
// linearizable read when it shows nothing) has a claimable job, and the
// leader proposes expiries and sweeps only when one is due. Busy ones write
// little: concurrent claims, acks, naks, extends and terms of a member
// share raft entries, as submits do.
//
// # Guarantees
//
//   - Durability: every success is returned only after the entry is
//     committed (fsynced on a quorum) and applied.
//   - Exactly-once submit: the controller keys every job by its ID and
//     retries across leader changes and unknown outcomes with the same ID
//     until it knows the outcome, so a submit that returned success exists
//     once, and one that returned ErrNotSubmitted does not exist.
//   - Fencing: a lease's token is the raft index of the claim; an ack, nak,
//     extend or term with any other token is refused, so a worker that lost
//     its lease (paused past it, canceled job) can never complete the job.
//   - Leases expire only by the leader's expire command, never earlier than
//     the deadline on the leader's clock and, after a leader change, never
//     before the new leader has been in office a full TTL on its own clock
//     (clock offsets between members do not shorten a lease; rate drift is
//     assumed bounded).
//   - Watch yields committed events in index order, identical on every
//     member, resumable from any index still retained in memory.
//
// # Leader duties
//
// The member that leads proposes, and only while it leads: the lease
// expiry command every Config.ExpireInterval (when a lease is due) with the
// time it took office on its own clock, and the retention sweep every
// Config.SweepInterval. Both are proposed with raft.Node.ProposeOnLeader:
// never forwarded to another member, never carried into another term.
//
// # Backup and restore
//
// Controller.Backup writes the whole job state at a linearizable point (a
// read barrier, then a copy-on-write snapshot) in the backup package's
// format, sealed and verified before the first byte is written. Restore
// checks a backup file whole (VerifyBackup: header, manifest, SHA-256,
// the state rebuilt to its digest) and only then seeds an empty data dir
// as a member of a new cluster (raft.Seed); a corrupt file is refused with
// a *backup.CorruptError and nothing is written. docs/backup.md has the
// format and the procedure.
//
// # Caveats
//
//   - Idempotency lasts as long as the job is retained: after a finished
//     job is swept (Config.RetainFor), its ID and key can be reused.
//   - A claim whose outcome stays unknown (its context ended first) may
//     have leased jobs nobody holds; they come back after their lease TTL
//     (the attempt counts). Before that, Claim retries with its claim ID,
//     which answers the leases an earlier attempt granted.
//   - Members must all run the same release: mixed-version clusters are
//     not supported (docs/jobs.md, versions).
//   - Watch history is in memory: a restarted member retains only what it
//     applied since its last snapshot.
//
// # Where things are
//
// This package is the public face: the Controller and its Config
// (controller.go, config.go), the job nouns (job.go), submit, claim, lease
// operations, the operations on a job ID, reads, watch and wait, the
// worker runner, the leader's duties, backup's face (backups.go) and the
// errors. The machinery is below it: internal/coalesce coalesces
// concurrent requests into shared entries (its hold decided by a pure
// function), internal/watchlog is the replicated state machine with the
// member's watch log, lease fences and claim wake-ups, and package backup
// writes, checks and restores backups. The system tests (failover,
// linearizability, frozen leader, clock skew, entries per cycle) are in
// internal/test/e2e.
//
// docs/controller.md has the design notes, test map and figures.
package jobraft
