// Package chaos is the seeded chaos harness: random fault schedules over a
// cluster of real jobraft Controller processes (clustertest.CtlProcs) under a
// mixed client workload, judged by every checker, continuously and at the
// end.
//
// A schedule (Schedule) is data: a list of timed actions from every fault
// family (kill -9 and restart, SIGSTOP/SIGCONT, partitions symmetric,
// non-transitive and one-way, flapping links, drop/duplicate/delay,
// fsync errors, a full disk, a stalled disk, a power loss (the log loses
// what it had not fsynced), a lying disk, bit flips in a minority's log or
// snapshot, clock skew, leadership transfer, and membership changes:
// add, remove and replace over spare member processes), printed and
// parsed by String/Parse, generated from a seed by Generate
// (math/rand/v2, PCG). The member set is dynamic: the checkers use the
// configuration the harness changed (members.go).
//
// A run (Run) has two phases: the fault phase of the schedule's Span,
// with the workload running, then the final phase: every fault undone,
// every member started, the workload stopped, and the final checks. What
// is replayed exactly is the schedule; the workload's interleaving and the
// machine's timing are not, so a failing seed is shrunk (Shrink) and kept
// under testdata/ as a schedule file, replayed by the package's tests.
//
// Checkers (check*.go), each naming itself in a verdict:
//
//	acked-set      every acknowledged submit exists exactly once on every member; nothing unsubmitted exists
//	applied        every member applied a prefix of the committed log (internal/test/history), continuously
//	walcompare     the members' logs: 0 committed divergences, 0 payload lost
//	election       at most one leader per term, from every status observation
//	linearizable   porcupine over the model jobs' operations (internal/test/jobmodel)
//	digest         equal state digests at equal applied index, continuously
//	fencing        no ack, nak or extend accepted on a lease already superseded
//	liveness       a leader within the bound whenever a quorum is up and connected
//	leader-wait    an operation on a member cut off from every quorum ends within LeaderWait's bound
//	convergence    every live voter converges in the final phase
//	membership     every change completes; the leader's voters are the expected ones
//	powerloss      a member keeps, across a power loss, every entry it had applied
//	deps-order     no dependent claimed before every parent's ack was called (deps.go)
//	batch-once     a batch's completion job at most once, after every member ended, present when all did
//
// Safety verdicts are strict, under a power loss too (it breaks no Raft
// assumption); in a run where a disk lied they excuse what docs/chaos.md
// lists. Liveness bounds are widened by the scheduling stalls the harness
// measured (internal/test/stalltest), never a safety check.
package chaos
