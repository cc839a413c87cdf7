// Package fsm defines the contract a replicated state machine implements to
// ride on a jobraft node (StateMachine), and provides the job state machine.
//
// # The caller's contract (what raft.Node does)
//
//  1. Apply is called once per committed command entry, in index order, never
//     concurrently with Snapshot or Restore.
//  2. Entry.Time is the proposing leader's clock; no other time source exists
//     inside Apply.
//  3. Snapshot is taken on the apply goroutine; Persist then runs on another
//     goroutine while Apply continues.
//  4. Restore is given a stream that a Snapshot of the same state machine
//     type produced; it must verify the stream before replacing anything.
package fsm
