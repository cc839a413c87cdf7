// Package duties is the leader's periodic work behind a jobraft
// Controller: while its member leads, the lease expiry command every
// ExpireInterval (when a running lease is past its deadline), the
// retention sweep every SweepInterval (when the state shows a job it would
// remove), and the schedules' fire command when a tick is due by its clock
// (waking for the next tick).
//
// What one tick proposes is decided by a pure function (Decide, decide.go)
// of what the duties remember (State), what the tick sees (Tick) and the
// policy; Run is the thin shell around it that owns the ticker, the role
// events and the proposals.
//
// # The caller's contract
//
//   - An expire carries LeaderSince, this member's clock when it was first
//     seen leading in the current term (never earlier than it took
//     office, so the state machine's skew rule stays conservative), and
//     the term: the state machine refuses it when appended in another.
//   - Every command is proposed with raft.Node.ProposeOnLeader for the
//     term it was decided in: never forwarded, never proposed in another
//     term. A member that steps down stops proposing at its next tick (a
//     proposal racing the step down is refused by raft as not-leader).
//   - An idle cluster writes nothing: no expire without a due lease, no
//     sweep without a job to remove, no fire without a due tick.
package duties
