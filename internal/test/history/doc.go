// Package history records what each member's state machine applied and
// checks it against the committed log: the applied-history checker.
//
// A member whose state machine applies an entry that is not the committed
// entry at that index has broken state machine safety (Raft §5.4.3) even if
// its log is repaired later: the effect of the wrong entry stays in its
// state. A log comparison at the end of a run (walcompare) cannot see it,
// because the wrong entry may be gone from every log by then; a digest
// comparison sees only that states differ, and a test waiting for equal
// digests reports a timeout. This package names the violation instead:
//
//	applied-history violation: member m0 applied index 12 term 2 crc 5e1f2a3b,
//	committed log has term 3 crc 00000000
//
// # Recording
//
// A raft.Node opened with nodeopt.Applied(sink) (a raft.Option the
// module's tests pass) calls sink.Append from its state machine
// goroutine:
//
//  1. one Started record when it opens (the state machine is empty);
//  2. one Restored record (the snapshot's applied index) whenever the state
//     machine is replaced by a snapshot, on start or on an install from the
//     leader: the member's history jumps there;
//  3. one Applied record (index, term, raft log type, CRC32C of the entry's
//     Data: the same CRC as its payload stamp and walcompare's view) per
//     entry handed to the state machine: commands and configurations
//     (hashicorp/raft applies no-op and barrier entries itself), after the
//     batch was applied and before the node's applied index moves.
//
// Memory keeps a member's records in memory across restarts of an
// in-process member; File appends them to a file in the member's data dir
// (FileName), one write per batch, so they survive a SIGKILL: a torn last
// record is ignored when read, and cut when the next run opens the file. A
// write error ends a File's recording and is handed to OpenFile's onErr
// (the test harnesses' member processes exit on it).
//
// # Checking
//
// A Checker reads every member's records (Source) incrementally and checks
// them against a Reference: one member's log (a Log; the test helpers adapt
// a walcompare.Member, live, over RPC or on disk, with
// clustertest.ReferenceLog) whose entries at or below Reference.Commit are
// committed. The package imports no log reader itself: raft links it for
// the Sink, and must not link walcompare. Within one run of a member (from a Started or Restored record):
//
//   - each applied (index, term, type, CRC) equals the committed entry at
//     that index;
//   - indexes strictly increase, and no committed command or configuration
//     entry between two applied ones (or between the restored index and the
//     first applied one) was skipped;
//   - entries the reference no longer holds (compacted) are checked across
//     members instead: any two records of one index must agree;
//   - in a final check (the run is over and the reference holds the final
//     log), nothing was applied beyond the reference log.
//
// A record above the reference's commit index waits for a later check (a
// follower may learn a commit index before the chosen leader does); in a
// final check the reference's whole log counts. Each violation is reported
// once, with the member, the index and both entries' terms and CRCs.
//
// # Caveats
//
//   - The checker trusts the reference's commit index: choose the leader
//     of the highest term (its log holds every committed entry, and its
//     commit index only ever counts committed ones).
//   - Records carry CRCs and lengths only, never payload bytes.
//   - The file format is versioned (see file.go); an unknown version or a
//     damaged record before the last is refused with ErrCorrupt.
package history
