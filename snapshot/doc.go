// Package snapshot is a raft.SnapshotStore that seals every snapshot with a
// manifest and publishes it only after a consistency gate has re-read it
// from disk. On-disk layout, manifest format and crash safety per step are
// in docs/snapshot.md.
//
// # Basics
//
// Open(dir) returns a *Store; hand it to raft.NewRaft as the snapshot store.
// It creates dir durably (the directory holding each directory it creates
// is fsynced). All IO goes through a file-system seam (WithFS; tests pass
// wal/faultfs to inject faults and an honest power loss).
// Store.Create returns a sink; raft streams the FSM state into it (the
// artifact) while the sink computes its size and SHA-256. sink.Close then:
//
//  1. flushes and fsyncs the artifact;
//  2. writes the manifest (format version, ID, index, term, configuration and
//     configuration index, size, digest, created time) and fsyncs it and the
//     candidate directory;
//  3. re-reads the manifest and the artifact from disk and checks that the
//     manifest is the one sealed and the artifact has its size and digest;
//  4. publishes — atomic rename of the candidate directory to its ID and
//     fsync of the store directory — only if step 3 agreed; then prunes
//     beyond the retain count.
//
// Store.Open(id) returns at once, after the cheap checks (the manifest is
// valid and names id; the artifact has the manifest's length, by stat),
// with a reader that verifies as it is read: it hashes every byte and
// withholds the artifact's final 64 KiB until it has read the file to its
// end and found its size and SHA-256 equal to the manifest's; otherwise it
// ends in a *GateError instead of handing them out. So no consumer ever
// receives the whole of an artifact that differs from its manifest, nor a
// clean io.EOF after one: a leader streaming a corrupt snapshot never
// sends its Size bytes (raft's receiver fails the short stream), and a
// restore that reads to io.EOF fails. Store.Verify(id) is Open read to the
// end.
//
// # Guarantees
//
//   - A snapshot is listed only if it was published and its manifest passes
//     Manifest.Validate, names its directory, and its artifact has the
//     manifest's length. List returns newest first by (term, index, created
//     time, ID), at most the retain count.
//   - A rejected candidate is never published and nothing is published in
//     its place: List and Open keep returning the previous snapshots.
//   - The gate fails closed: a read error during the re-read rejects, it
//     does not pass.
//   - A crash at any step leaves either the previous set of published
//     snapshots or that set plus the new, complete one. Open(dir) removes
//     the leftovers (*.tmp, *.trash).
//
// # The caller's contract
//
//  1. Use a directory that only this store writes to, opened by one Store in
//     one process at a time.
//  2. Write to a sink from one goroutine, then call exactly one of Close or
//     Cancel (both are idempotent; a second Close returns the first's result).
//  3. Treat an error from Close as "no snapshot": do not Open its ID. raft
//     does this (takeSnapshot and installSnapshot fail).
//  4. Close every reader Store.Open returned. Read it to io.EOF before you
//     act on what it held (replace a state, acknowledge a copy): the
//     artifact is verified only at its end, and bytes handed out before
//     may be those of a corrupt artifact.
//  5. Event callbacks run synchronously on the goroutine that caused them;
//     keep them short. They may call the store.
//
// # Errors
//
//   - *GateError (errors.Is ErrGateRejected and ErrCorrupt): from Close, the
//     candidate was rejected; from Store.Open (its length) or its reader
//     (its length or digest, or a read error), the published artifact
//     differs from its manifest. It carries paths, sizes, hex
//     SHA-256 digests, equality flags, index and term — never contents. A
//     rejected candidate is kept as rejected-<id>/ with diagnostic.json (the
//     newest three by default, WithKeepRejected).
//   - *ManifestError (errors.Is ErrManifestInvalid and ErrCorrupt): a
//     manifest that does not decode or fails Validate; every problem is
//     listed. Store.Open returns it; List skips such snapshots and reports
//     them as Refused events.
//   - ErrNotFound: Store.Open of an ID that is not published.
//   - ErrUnsupportedVersion, ErrInvalidMeta: Create with a raft snapshot
//     version other than 1, or metadata that cannot make a valid manifest.
//   - ErrSinkClosed: Write after Close or Cancel.
//   - Anything else (wrapped with %w) is an I/O error.
//
// # Caveats
//
// The deprecated SnapshotMeta.Peers (raft snapshot version 0) is not
// stored; only version 1 is supported. Snapshots whose manifest is corrupt
// are left in place (as evidence) and do not count toward retention.
// Without WithSync(false), every step is fsynced; with it, nothing is
// crash-safe.
package snapshot
