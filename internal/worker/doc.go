// Package worker is the worker runner behind jobraft's Controller.Run: per
// queue, a loop that claims as many jobs as it has free slots, runs each
// job's handler with its lease extended every TTL/3 and fenced (the
// handler's context ends when the lease ends), and ends the lease with what
// the handler returned.
//
// What a handler's return does to its lease is decided by a pure function
// (Decide, decide.go), and so is the check of a configuration (Plan); Run is
// the thin shell around them that owns the goroutines, the tickers and the
// controller's calls (Member).
//
// # The caller's contract
//
//   - Plan a configuration first: Run takes only the claims Plan made.
//   - Member.Claim claims up to Claim.Max jobs; a paused queue is no error
//     (nil, nil: the claim waited through the pause).
//   - Member.Gone says whether a lease operation's error means the lease
//     is over (stale, or the job removed): the handler's context is then
//     canceled with ErrLeaseLost, and nothing is reported.
//   - Handlers may panic: a panic is recovered and naks the job.
package worker
