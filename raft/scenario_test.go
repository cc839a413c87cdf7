package raft_test

import (
	"flag"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Flags of the scenario tests (scenario_*_test.go):
//
//	-raft.long      heavier variants: more rounds, longer faults
//	-raft.seed=N    replay a scenario's random choices (the fault network's
//	                decisions, kill points); the interleaving stays up to
//	                the scheduler
var (
	scenarioLongFlag = flag.Bool("raft.long", false, "run the long variants of the scenario tests")
	scenarioSeedFlag = flag.Int64("raft.seed", 0, "replay a scenario test's random choices from this seed (0: a new seed)")
)

// scenarioLong reports -raft.long.
func scenarioLong() bool { return *scenarioLongFlag }

// scenarioSeed returns the test's seed (-raft.seed, or a new one) and logs
// the command that replays it.
func scenarioSeed(t testing.TB) int64 {
	t.Helper()
	seed := *scenarioSeedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	t.Logf("seed %d (replay: go test -race -run '^%s$' ./raft/ -raft.seed=%d)", seed, strings.Join(parts, "$/^"), seed)
	return seed
}

// scenarioRand returns the seed and a generator drawing from it.
func scenarioRand(t testing.TB) (int64, *rand.Rand) {
	t.Helper()
	seed := scenarioSeed(t)
	return seed, rand.New(rand.NewSource(seed))
}
