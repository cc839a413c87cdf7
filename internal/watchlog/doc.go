// Package watchlog is the state machine a jobraft Controller replicates
// (Recorder: fsm.Jobs plus what its applies tell the member), and the
// member-local record of what they did: the bounded in-memory history of
// job events that Watch serves (Since, Bounds), the fences that end a
// worker runner's handler when its lease ends (Fence, LeaseEnd), and the
// wake-up of claims waiting for a claimable job (Ready).
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
//     commands touching no fenced job) are recorded undecoded and turned
//     into events when first read: watchers are few.
package watchlog
