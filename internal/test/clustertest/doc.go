// Package clustertest is the one test cluster of jobraft: members — raft
// nodes or controllers — run in this process or as child processes, and
// one set of checks over them.
//
// A Member is what the checks see of any member: its ID, whether it is up,
// its raft status, a linearizable read, its log and its applied history.
// A Group holds the checks, written once for every kind of cluster: who
// leads (Leader, WaitLeader, LeaderAbove), waiting for the members to
// converge (WaitConverged, WaitConvergedOf: equal commit, last and applied
// index and state digest), and the applied-history checks against the
// leader's log (AppliedViolations, CheckApplied, RequireApplied), run on
// every poll of the waits so a member applying a wrong entry is named when
// it happens.
//
// Two runners start members. In this process, a cluster opens and closes
// them (StartMember, StopMember). As a child process, a Proc starts one
// from a command line and crashes it for real (Kill: SIGKILL), freezes it
// (Pause: SIGSTOP, Resume) or stops it gracefully (Stop); a child is the
// test binary re-executed (the package's TestMain calls Main), or any
// program (the examples' jobd cluster runs jobd on Procs).
//
// The clusters:
//   - NodeCluster (StartNodes): raft.Nodes over a KV state machine, in
//     process, optionally over a fault network (faultnet).
//   - NodeProcs (NewNodeProcs): raft.Nodes over a KV as child processes,
//     driven through a control RPC.
//   - CtlCluster (StartCtls): jobraft Controllers in process.
//   - CtlProcs (StartCtlProcs, StartJoiner): Controllers as child
//     processes, driven through a small HTTP member API (Handler) with
//     fault injection (FaultSpec, PowerLoss, LoseLog); the chaos harness
//     runs on it.
//
// The parent reads a child's state only through APIs, never from its log
// text; child logs go to files for a human reading a failure. Waits are
// liveness bounds widened by the measured scheduling stalls (WaitFor, Ctx).
package clustertest
