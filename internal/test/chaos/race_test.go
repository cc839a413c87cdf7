//go:build race

package chaos

// raceFlag is the flag a replay command needs to run as this binary does.
const raceFlag = " -race"
