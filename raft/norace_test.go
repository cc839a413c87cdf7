//go:build !race

package raft_test

// raceEnabled: see race_test.go.
const raceEnabled = false
