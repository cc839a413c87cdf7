//go:build race

package raft_test

// raceEnabled: this test binary runs with the race detector, several times
// slower per operation.
const raceEnabled = true
