//go:build race

package jobraft_test

// raceEnabled: this test binary (and so every child member process it
// starts) runs with the race detector, several times slower per operation.
const raceEnabled = true
