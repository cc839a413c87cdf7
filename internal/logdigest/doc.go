// Package logdigest is the digest protocol a raft member serves about its
// own log, so that a comparer (walcompare) can prove members agree without
// stopping them or reading their files. It is the small, read-only piece
// every member links: it imports only hashicorp/raft and wal. It is
// internal: walcompare is its public face (DigestMethod, Digest,
// SplitRange, RangeDigests, ServeDigest).
//
// # The protocol (a contract: the wire format is frozen)
//
// A member serves Method ("jr.walcompare.digest") on its RPC channel with
// Serve (raft.Config.LogServices; jobraft.Open names it for every member). A request is a JSON Request, a reply a JSON Reply. Index bounds in
// requests and digests are inclusive: [From, To], both held. Every reply
// carries the member's bounds, First and Last (0, 0: an empty log), and its
// persisted commit floor (Floor; HasFloor false when the store has none).
//
//  1. Op "info": the bounds and the floor only.
//  2. Op "digests": Parts (1..MaxParts) digests of [From, To] (From <= To),
//     one per sub-range SplitRange(From, To, Parts) gives, in order. Both
//     sides compute SplitRange: the client matches digests to ranges by
//     position.
//  3. Op "entries": the View of every index in [From, To] the member holds,
//     ascending, at most MaxEntries indexes (To-From < MaxEntries). Indexes
//     outside [First, Last] or not held are left out.
//
// Anything else is refused with an error wrapping ErrBadRequest or
// ErrUnknownOp; over the RPC channel only the error's text arrives.
//
// # What a digest covers
//
// A Digest of [From, To] counts the entries held there (Count), those that
// fail their checks (Bad: corrupt, or an empty body under a non-empty stamp)
// and sums, modulo 2^64 in two lanes, a mixed 128-bit hash of every held
// entry's (index, term, entry type, payload length, payload CRC32C), plus
// the corrupt flag, and for a lost payload its stamp's length and CRC. The
// sum is additive: a range's digest is the sum of its sub-ranges'. It says
// nothing about indexes not held (Count shows holes), nor about the
// entries' Extensions beyond the stamp. It is not cryptographic: it finds
// accidents (rot, a lost write, a divergent term), not adversaries.
//
// # Views
//
// ReadView turns one GetLog into a View: term, type, payload length and
// CRC32C, the stamp (length and CRC the payload had when proposed), and a
// Corrupt flag with a Detail when the record cannot be read whole. A View
// never holds payload bytes. A *wal.GuardError refusing an empty body under
// a non-empty stamp is not corrupt: it is a lost payload (View.Lost).
//
// # Caller's duties
//
//  1. Serve only reads: it calls FirstIndex, LastIndex and GetLog, and may
//     run concurrently with appends; a reply is a snapshot of no single
//     instant when the log changes under it.
//  2. A digests request costs one GetLog per held index in [From, To]; the
//     context is checked every 16384 indexes.
//  3. MaxParts and MaxEntries are part of the protocol: clients chunk by
//     them, so a server must not lower them.
package logdigest
