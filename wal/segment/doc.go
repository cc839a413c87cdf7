// Package segment is the IO under jobraft's log (package wal): the segment
// files, their byte format, and the store that replays, writes and reads
// them. It decides nothing about what may be written: package wal's persist
// guard (G1–G7) decides every write and verifies every read, and this
// package only carries out what the guard accepted. Callers use wal; the
// few names of this package a caller needs (Stamp, ParseStamp, Checksum,
// TermList, the offline Reader) are listed below. The byte layout and the
// crash safety per operation are in docs/wal.md.
//
// # What it holds
//
//   - The format (format.go, frames.go): segment and frame headers, entry
//     records, first-index marks, the payload stamp (stamp.go: Stamp,
//     VerifyStamp, ParseStamp, Checksum).
//   - Open's replay (load.go, scan.go, replay.go): every segment is scanned
//     with the one frame parser; a torn tail is cut, damage before it is
//     refused with ErrCorrupt, or cut with Config.Repair (RepairReport).
//   - The store (Store): bounds, reads through an offset index and a cache
//     of recent entries (cache.go), appends (one write and one fdatasync per
//     batch), the deferred writer (deferred.go: Durable, DurableChanged),
//     compaction, truncation and reset made durable by first-index marks and
//     segment headers (delete.go, first.go), fail-closed after a write or
//     sync error (failure.go), the commit floor (floor.go), the term index
//     (terms.go: TermAt, TermStarts, AdoptTerms, ForgetTerms) and a bbolt
//     raft.StableStore in the same directory (stable.go).
//   - The read-only Reader (reader.go): an offline view of a log directory,
//     record by record, past damage (walcompare uses it).
//   - The errors the store and the guard share (errors.go): the sentinels,
//     *GuardError, Op and Shape; wal re-exports each under the same name.
//
// # The write side is the guard's
//
// Open returns a *Writer: the only way to append or delete entries. It
// checks nothing the guard checks, so package wal keeps it private behind
// wal.Log's guard; Writer.Store is the rest of the log (bounds, durability,
// the floor, the term index, the stable store, Close), which wal.Log embeds.
// A caller that opened a Writer must put the same guard in front of it.
//
// # Imports
//
// This package imports wal/vfs (the file-system seam) and never
// package wal; wal imports it. Its external tests (package segment_test)
// open a guarded wal.Log and look at the files it wrote through
// export_test.go.
package segment
