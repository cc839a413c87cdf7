// Package seam is jobraft's reconcile seam: the one place where a member
// corrects the rules of the Raft paper that hashicorp/raft v1.7.3 bends
// (docs/upstream.md, U1-U13), before raft sees an RPC.
//
// It has two halves:
//
//   - decide.go, the pure core: every decision of the seam as a function
//     of a plain view struct (numbers, flags, names; no raft, no log, no
//     clock): the commit clamp (Clamp, U1), Figure 13 step 6 and the floor
//     check of an install (Install, PastFloor, AfterCheck, Recheck, U2), a
//     stale last index (StaleAppend, StaleVote, U3), a truncation whose
//     store would be refused (Append, U4), TimeoutNow (U5), the heartbeat
//     fast path (Heartbeat, U6), the campaign gate (Campaign, U10), the
//     commit bound (Bound, U11) and a silent leader's stickiness
//     (LeaderSilent, LiftWait, PreVote, U13). Each is tested by a table and
//     all of them by a rapid property test.
//   - the transport wrappers: Wrap, the outermost layer of a member's raft
//     transport, through which every inbound RPC passes, and
//     DrainPipelines (hashicorp/raft #612, U9) under it.
//
// # The member's contract (what package raft does)
//
//  1. Build one Hooks value and wrap its raft transport with Wrap,
//     outermost, before hashicorp/raft starts; give raft nothing else.
//  2. In each hook, read a view — raft only through its lock-free
//     accessors, never through its main loop (raft may be waiting for the
//     seam) — call the decision, and act on the verdict: answer the RPC
//     (Intercept returns true after rpc.Respond, with the request's stream
//     read to its end), or let raft have it.
//  3. Fill a view whole, except where its doc lets a field stay zero once
//     an earlier one decides (AppendView, CampaignView): the member then
//     reads its log only when the verdict depends on it.
//
// # Guarantees
//
//   - Every inbound append is clamped (U1), on the consumer path and on the
//     heartbeat fast path alike; every outbound append, pipelined or not,
//     carries a commit index within Hooks.CommitBound (U11).
//   - Wrap hands raft one RPC at a time and waits for its answer, so a
//     decision always sees the log raft left after the previous RPC; a
//     heartbeat Hooks.FastPath refuses goes through raft's main loop (U6).
//   - Hooks.InRaft brackets each RPC raft handles; Hooks.Answered sees
//     raft's answer before the sender does.
//   - Wrap and DrainPipelines keep raft.WithPreVote and raft.WithClose of
//     the transport they wrap; everything they do not correct is the inner
//     transport's own.
//   - The decisions are pure: a function of their view only.
package seam
