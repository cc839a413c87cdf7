// Package wal is jobraft's log: a segment-file raft.LogStore (also a
// raft.MonotonicLogStore and, through bbolt, a raft.StableStore) with the
// persist guard built in, and the same guard as middleware over any other
// raft.LogStore (NewGuard). The byte layout, crash safety per operation and
// the assumptions are in docs/wal.md.
//
// # Layout
//
// The log is two packages, the guard on top of the IO: package wal holds
// Log, the persist guard and its pure decisions (guard.go, decide.go), the
// Guard middleware and Open's options; package wal/segment holds the
// segment files, their format, Open's replay and the store that writes and
// reads them, the term index, the stable store, the stamps and the offline
// Reader. wal imports wal/segment, never the other way round. Log embeds the
// store (*segment.Store: bounds, durability, the floor, the term index, the
// stable store, Close) and keeps its write side private behind the guard,
// so every entry written or read passes the guard. The errors, GuardError,
// Op and Shape are wal/segment's, re-exported here as the same values.
//
// # What the log guarantees (the guard, G1–G7)
//
// Every StoreLogs, DeleteRange and GetLog passes the guard, whatever store
// is underneath:
//
//   - G1: no entry with index 0 or term 0 is stored.
//   - G2: appends are contiguous and terms never decrease along the log; the
//     first entry of an empty log lies above the commit floor.
//   - G3: an existing index is never overwritten, not even with identical
//     bytes: replacing an entry takes a suffix truncation first.
//   - G4: a suffix truncation never reaches the commit floor, prefix
//     compaction never passes it, and no hole is punched; removing the whole
//     log (what hashicorp/raft does after a snapshot install on a monotonic
//     store) is a reset, and the floor survives it. With SetResetBound, a
//     reset that removes committed entries needs a snapshot reaching the
//     floor (the node binds the last snapshot its store sealed).
//   - G5: a stamped command payload (segment.Stamp, carried in
//     Log.Extensions) is
//     verified against its stamp before it becomes durable and again on every
//     read; an empty or altered body is never persisted and never returned.
//     An entry that arrives unstamped is stored with a persist stamp so its
//     reads are verified too; GetLog removes that stamp again, returning
//     exactly what StoreLog was given.
//   - G6: a refusal is typed, counted in metrics, reported to OnRefusal, and
//     leaves the log unchanged.
//   - G7: a returned StoreLogs is on disk (one write and one fdatasync per
//     batch); Open cuts a torn tail (an unacknowledged last batch) and
//     refuses to open over damage anywhere else. StoreLogsDeferred is the
//     exception a caller asks for by name: its batch is durable once
//     Durable reaches it (a Raft leader appending while it replicates);
//     every other write first makes what it left durable.
//
// # What the caller must do
//
//  1. Be the log's only writer: one raft instance, one process. The log
//     assumes nobody else writes its directory.
//  2. Bind the commit floor as early as it can: SetCommitFloor(fn), with fn
//     returning the highest index known committed (jobraft's node binds
//     max(raft commit index, index the state machine has applied)); the
//     guard then checks every compaction against it. A log that is never
//     bound (a plain hashicorp/raft user) trusts raft's compaction contract
//     instead: hashicorp/raft deletes a prefix only up to the index of a
//     snapshot it has persisted, and a snapshot holds only committed
//     entries, so a prefix DeleteRange is itself the proof that its entries
//     are committed. The floor rises to its end and is made durable with
//     it: later truncations at or below it are refused, across restarts.
//     Without that, an unbound log would refuse every compaction and grow
//     for ever. Bind the floor to have compactions checked, not trusted.
//  3. Stamp command entries at proposal (segment.Stamp) so that every member can
//     verify their payloads; open with RequireStamp to refuse unstamped
//     command entries.
//  4. Treat ErrFailed as fatal for this open log: after a write or fsync
//     error nothing more is written; close and reopen it (an fsync is never
//     retried).
//  5. Close it after raft has shut down; Close persists the floor. Close
//     of a failed log returns ErrFailed: what it held beyond Durable was not
//     made durable.
//
// # What each error means
//
// Refusals (the log is unchanged; errors.As gives a *GuardError with op,
// index, term, the log's shape, the floor, lengths, CRCs and equality flags,
// never payload bytes): ErrZeroTerm (G1), ErrNotContiguous and
// ErrTermRegression (G2), ErrOverwrite (G3), ErrCommittedTruncate and
// ErrInvalidRange (G4), ErrPayloadMismatch and ErrUnstamped (G5),
// ErrTooLarge (an entry or batch the format cannot hold). RefusalKind names
// the refusal for metrics.
//
// Damage: ErrCorrupt (IsCorrupt) — a record or header fails its checksum or
// its stamp on read, or Open found damage before the tail; the diagnostic
// names the segment, offset and first index affected. Opening with Repair
// cuts the log at the first damage instead and reports what it cut
// (Log.Repaired); the member then fetches those entries again from its
// peers — only safe for entries above the cluster's commit index or held by
// a majority.
//
// State: ErrFailed (a write or sync failed; reopen), ErrClosed (any method,
// the stable store's included, used after Close). Absent entries are raft.ErrLogNotFound itself, as hashicorp/raft
// compares it by identity.
//
// # Caveats
//
//   - Prefix compaction makes the new first index durable first (a
//     first-index mark), then removes whole segments below it: FirstIndex
//     never moves backwards across a restart, while entries of a partly
//     compacted segment stay on disk, never served again.
//   - A reset keeps the floor: the first entry stored after it must lie
//     above the floor (G2), which is what a snapshot install provides.
//     With SetResetBound, a reset that would remove committed entries is
//     refused unless the caller's latest durable snapshot reaches the floor.
//   - The guard protects the log's shape and bodies; it cannot tell a stale
//     leader from a current one. That is raft's job, and jobraft corrects
//     hashicorp/raft where it bends the Raft paper at the transport seam
//     (docs/upstream.md).
package wal
