// Package backup is a jobraft cluster backup: its file format (one job
// state at one applied index, sealed with a manifest, in a single file
// that can be streamed over HTTP or to object storage and checked end to
// end before anything is restored from it), how one is written from a
// state snapshot (Write, behind jobraft.Controller.Backup), checked whole
// (VerifyFile) and restored into a new cluster's data dir (Restore).
//
// # Layout
//
//	offset  size  field
//	0       8     magic "JRBACKUP"
//	8       2     format version (1), big-endian
//	10      2     flags, must be 0
//	12      4     manifest length n, 0 < n <= 1 MiB, big-endian
//	16      4     CRC-32C (Castagnoli) of the manifest bytes, big-endian
//	20      n     manifest: a JSON object (Manifest), nothing after it
//	20+n    Size  artifact: the state machine's snapshot stream (fsm)
//
// Nothing follows the artifact. The manifest carries the artifact's size
// and SHA-256 and, embedded, a snapshot manifest of the artifact in the
// snapshot package's format (the same index, size and digest), plus the
// cluster ID, the member that took it, the index and the term, and the
// state digest the artifact verifies to.
//
// # Guarantees
//
//   - Encode refuses a manifest that fails Validate.
//   - Decode (and Verify) refuse, with a *CorruptError listing every
//     problem found, a file whose header, manifest CRC or manifest fields
//     are wrong, whose artifact is shorter or longer than its manifest
//     says or has another SHA-256, or that has trailing bytes. The
//     artifact's reader returns the error instead of io.EOF, so a consumer
//     that reads to the end never takes a corrupt artifact for a good one.
//   - Decoding never panics on any input.
//   - Write verifies a backup before a byte reaches its writer, in
//     memory that does not grow with the state: the state stream is
//     spooled once, hashed and checked by fsm.VerifySnapshot as it
//     passes (the same verdict as a restore), then streamed from the
//     spool with its SHA-256 checked again.
//   - VerifyFile, and Restore before it writes anything, verify the
//     artifact with fsm.VerifySnapshot (no state is built) and compare
//     its index, state digest and job count with the manifest's; Restore seeds only an
//     empty data dir (raft.Seed).
package backup
