// Package walcompare proves that raft members agree: it compares their logs
// index by index — term, entry type, payload length and payload CRC32C —
// and reports every divergence, telling lag from corruption and committed
// from uncommitted.
//
// # Basics
//
//  1. Make members: FromLogStore(name, store) for any raft.LogStore;
//     OpenDir(name, dir) for a data dir on disk (a wal log dir, a raft.Node
//     data dir, or a raft-boltdb/v2 file), opened read-only and never
//     modified; Dial(ctx, name, addr, tlsConfig) for a running raft.Node,
//     read over its RPC channel (DigestMethod, the protocol of package
//     logdigest) without stopping it. Every member jobraft.Open starts
//     serves it; a bare raft.Node serves it when its Config.LogServices
//     names DigestMethod with ServeDigest.
//  2. r, err := Compare(ctx, members, Options{}). err is an IO or RPC
//     failure only; damage is reported, not returned. Options.From and
//     Options.To, when set, are the first and last index to compare.
//  3. len(r.CommittedDivergences()) must be 0. r.Divergences lists every
//     divergence in ascending index order; r.Proof says how the committed
//     boundary r.Committed was proven; r.Summary counts each class.
//  4. Close the members.
//
// # Classes
//
// Per index, each member is Same, Missing (its log ends earlier: lag),
// Compacted (below its first index), TermMismatch, PayloadMismatch (same
// term; type, length or CRC differ), PayloadLost (present but empty where
// the others have a body, or an empty body under a non-empty stamp) or
// Corrupt (its record fails its own checksum). The reference entry is the
// plurality among intact candidates (see Classify for the tie rules and
// three-way disagreements). Runs of Missing and Compacted are coalesced
// into [start, end) per member; they are never committed divergences.
//
// # Ranges
//
// Request bounds are inclusive: Options.From and Options.To, the from and
// to of Member.Scan and the CLI's --from and --to name the first and last
// index wanted, both included (0 leaves that side open); so do the digest
// protocol's [From, To] (Digest, SplitRange; its wire format is frozen).
//
// Every range in a Report is half-open, [start, end): the compared range
// [Report.From, Report.End), a Divergence [Index, End) (End is Index+1 for
// one index), and the ranges Proof and the table print. Report.To (End-1)
// is kept for callers of the inclusive form. Single indexes are indexes,
// not ranges: Committed, Held (a majority holds [1, Held+1) identically),
// Floor, and a member's First and Last (both held, as in
// raft.LogStore's FirstIndex and LastIndex).
//
// # The committed boundary
//
// The boundary is proven, never assumed: the highest commit floor any member
// persisted (wal segment headers and frames; a floor is only ever an index
// that was committed), or Options.Committed as the caller gives it — never
// raised, and flagged OverClaimed when a majority of members does not hold
// every index up to it identically (Report.Held). A divergence at or below the
// boundary is committed unless it is a Tail: a term mismatch on members
// whose own persisted floor is below the index (a former leader's
// uncommitted suffix, which log matching cuts).
//
// # Modes and cost
//
// Offline and mixed comparisons stream: each member is read by its own
// goroutine in index order, in batches, and compared side by side; memory
// is independent of log length (bounded by one wal segment per member).
// When every member is live, Compare asks each for range digests
// (logdigest.RangeDigests: a 128-bit sum over (index, term, type, length,
// CRC) per sub-range), recurses only into sub-ranges that differ or hold damage, and
// fetches per-entry views only for small differing ranges: O(fanout ·
// log(n)) calls per divergence, constant memory.
//
// # Caveats
//
//   - Live and on-disk views of one member can differ in compaction: a wal
//     segment partly compacted keeps its older entries on disk until a
//     compaction removes the whole file, and OpenDir (segment.Reader) shows
//     them, so it may report a lower first index than the member (whose
//     first index a first-index mark keeps across restarts).
//   - A floor mark is written when a log closes, so a stopped member's
//     proven boundary may be higher than it was while it ran.
//   - Digests find accidents, not adversaries (not cryptographic).
//   - A raft-boltdb file has no checksums and no floor: nothing there is
//     Corrupt by checksum, and its boundary must come from other members or
//     Options.Committed.
package walcompare
