// Package coalesce is the controller's coalescing of concurrent requests
// into shared raft entries: a generic Coalescer (up to Policy.Inflight
// entries in flight, requests arriving meanwhile form the next ones), the
// Gate that holds the next entries of a member's coalescers for the
// callers of one just answered, and the two coalescers a jobraft
// Controller runs: Submits (submit requests into fsm.SubmitCmd entries)
// and Ops (lease commands into fsm.BatchCmd entries).
//
// The hold is decided by a pure function of the gate's state and one step
// (decide, hold.go); the Gate is the thin shell around it that owns the
// lock, the timer and the members.
//
// # The caller's contract
//
//   - Enqueue a request, then receive its answer from Pending.Done, or
//     give up: Withdraw tells whether it was still unsent (then nothing
//     was proposed for it). Recycle a request only once it can be
//     answered no more (its answer received, or withdrawn).
//   - Close answers every request still queued with Policy.Closed and
//     refuses new ones with Policy.ErrClosed.
//   - The coalescers of one member share one Gate (New joins it); a
//     coalescer's lock is its gate's.
package coalesce
