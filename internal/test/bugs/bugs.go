// Package bugs holds the deliberately injected bugs that prove the chaos
// harness's checkers catch what they name (internal/test/chaos). A bug exists
// only in a binary built with the build tag chaosbugs, and is armed only
// when the environment variable JOBRAFT_CHAOS_BUG names it (a comma-separated
// list arms several together); in every other
// build On is a constant false and the compiler removes the bug's code.
//
// The bugs:
//
//	clamp     raft/seam: the seam does not clamp a follower's commit index (Raft Figure 2)
//	floor     wal: the guard allows a suffix truncation at or below the commit floor (G4)
//	fencing   fsm: ack, nak, extend and term accept any token of a running job
//	dedupe    fsm: a submit whose ID exists creates a second job under a new ID
//	early     fsm: a waiting dependent is released when any one of its parents succeeds
//	batchearly fsm: a batch completes (its completion job is created) when any member ends
//	schedid   fsm: a schedule's job is named by the proposer's clock (the fire entry's stamp, cut to the second), not by its tick
//	limit     fsm: claims ignore the queues' and kinds' concurrency limits and rates
//	unique    fsm: a unique submit whose key a job holds creates a second job
package bugs

// Env names the environment variable that arms a bug (chaosbugs builds
// only).
const Env = "JOBRAFT_CHAOS_BUG"

// Names lists the bugs.
var Names = []string{"clamp", "floor", "fencing", "dedupe", "early", "batchearly", "schedid", "limit", "unique"}
