// Package watchlog is the state machine a jobraft Controller replicates
// (Recorder: fsm.Jobs plus what its applies tell the member), and the
// member-local record of what they did: the bounded in-memory history of
// job events that Watch serves (Since, Bounds), the fences that end a
// worker runner's handler when its lease ends (Fence, LeaseEnd), and the
// wake-up of claims waiting for a claimable job (WaitClaim).
//
// # The caller's contract
//
//   - Hand the Recorder to raft as the member's fsm.StateMachine; read
//     the state through Jobs. The history adds nothing to the replicated
//     state: digests and snapshots are fsm.Jobs' own, and a Restore
//     restarts the history after the restored index.
//   - Events are in index order, identical on every member for the same
//     indexes; the history keeps at most the entries and bytes New was
//     given, dropping the oldest first.
//   - A fence's end is called on the apply goroutine and must not block.
//     An end applied before the fence was set is in the history:
//     LeaseEnd finds it.
//   - Hot entries (a successful submit, a successful batch of lease
//     commands, or one such command alone, touching no fenced job) are
//     recorded undecoded and turned into events when first read: watchers
//     are few.
//   - A waiting claim registers (WaitClaim) before it checks the state. A
//     submit's jobs wake as many waiting claims as they can fill, first in
//     line first, per queue and kind (turns); other changes that make jobs
//     claimable wake every waiting claim. A woken claim Withdraws and owes
//     its turns a claim: one that does not take their jobs (it ends
//     first, or its claim came back empty) Passes them on, and a turn
//     passed on after an empty claim is dropped after a second one.
package watchlog
