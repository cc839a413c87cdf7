// Package e2e holds jobraft's system tests: whole clusters of controllers
// (in process, or child processes killed and frozen for real) driven
// through the public API only, with the internal test packages
// (internal/test/clustertest, internal/test/history, internal/test/jobmodel) as their
// harness. Exactly-once submits across leader kills (failover),
// linearizability under leader kills (porcupine against
// internal/test/jobmodel), a frozen leader's submits and reads resuming,
// leases under clock skew, and the log entries a job cycle costs (cycles).
//
// make soak runs the long rounds: -jobraft.long (6 kill rounds);
// -jobraft.seed=N replays a randomized test.
package e2e
