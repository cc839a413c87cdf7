//go:build !race

package jobraft_test

// raceEnabled: see race_test.go.
const raceEnabled = false
