// Package faultnet injects network faults between jobraft members, for
// tests: drops, delays, duplicates, partitions, one-way cuts, flapping links
// and one-shot response losses. It is a separate package so that no host
// binary links it: a node takes it only through the module's internal
// options (internal/test/nodeopt), which wrap the member's raft transport (Wrap)
// and its RPC caller (WrapCaller).
//
// # Guarantees
//   - Faults are applied on the sending side only; members that are not
//     wrapped send without faults.
//   - Flapping follows the wall clock; everything else replays from the seed
//     per directed link (the interleaving of concurrent messages is up to the
//     scheduler).
//   - Every failure it produces wraps ErrInjected, classed as
//     transport.ErrNotDelivered (the request was refused) or
//     transport.ErrIndeterminate (its response was lost) for RPC calls.
//   - It observes as well: AppendEntriesSenders and CheckElectionSafety
//     report the (term, leader) of every AppendEntries sent through a
//     wrapped transport; Stats counts messages per kind.
package faultnet
