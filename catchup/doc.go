// Package catchup is the policy that brings a new, returning, lagging or
// divergent member to convergence, and names one that does not converge.
// It is a pure core: its functions read no clock and do no IO; time and
// what the leader knows about each member come in as arguments. raft.Node
// wires it (a thin monitor on the leader feeds it one Observation per
// member per tick and acts on the Decision).
//
// # The caller's contract (what the leader's monitor does)
//
//  1. Keep one Tracker per member, created with the Policy, while this
//     member leads; discard them all when leadership is lost (the next
//     leader starts its own rounds).
//  2. On every tick, for every member, build an Observation from what the
//     leader knows (its own last and commit index; the member's progress
//     report, or Reached = false when none came; what the leader's
//     transport saw it send) and call Tracker.Decide with the tick's time.
//     Times must not go backwards.
//  3. Act on the Decision: Promote means add the member as a voter now;
//     Stalled and Diverged are to be reported (event, status, metric),
//     never acted on by changing the member's log.
//  4. Mark a member a Candidate only when an operator asked to add it: a
//     non-voter that is not a candidate is observed but never promoted.
//
// # Rounds (Raft thesis §4.2.1)
//
// A candidate is caught up in rounds. A round starts with a target: the
// leader's last index at the round's start. It ends when the member's last
// index reaches the target. A round that ended within one election timeout
// means the member keeps up: Promote. Otherwise the next round starts at
// once with a new target; after Policy.MaxRounds rounds that were all too
// long the candidate is Stalled with ReasonTooSlow. A round that ended in
// at most 3/4 of the time the round before it took does not count toward
// MaxRounds: the candidate converges (after a long install it replays the
// entries the leader took meanwhile, in rounds that shrink). The first
// round may be long (a snapshot of the whole state); only the last round
// has to be short. A non-voter never counts toward quorum, so a slow candidate costs
// the cluster no availability.
//
// # Named non-convergence
//
// A member that stops converging is named with a Reason: no progress for
// Policy.NoProgressRounds election timeouts while behind (ReasonNoProgress),
// no progress report for Policy.UnreachableRounds election timeouts
// (ReasonUnreachable), snapshot installs failing Policy.InstallFailures
// times in a row (ReasonInstallFailing), its guard refusing appends on
// Policy.GuardRefusals consecutive observations without progress
// (ReasonGuardRefusals), rounds exhausted (ReasonTooSlow), or a
// divergence at or below its commit floor (Diverged, with the index and
// both terms: never promoted, never repaired in place). For a candidate
// Stalled and Diverged are final (the add gave up: add it again to start
// over); for a voter they are re-evaluated on every observation, so a
// member back from a long absence is named while it is gone and becomes
// CaughtUp once it converged.
//
// # The stale last index detector
//
// StaleLastIndex and StaleWatch decide, on a follower, when hashicorp/raft's
// cached last index names an entry the member holds in neither its log nor
// its latest snapshot (the hashicorp/raft #697 shape), and when to ask the
// leader for a snapshot past it. SnapshotPastBound is the leader's check of
// such a request: bounded by what the asking member can prove, and by rate.
package catchup
