package ctltest

import (
	"flag"
	"os"
	"testing"
	"time"
)

// Main is the TestMain of a package whose tests run controllers: in a
// child member process started by Procs it runs the member and never
// returns (MemberMain); otherwise it parses the flags and runs the tests.
func Main(m *testing.M) {
	MemberMain()
	flag.Parse()
	os.Exit(m.Run())
}

// Seed returns the seed of a randomized test: s, or one from the clock
// when s is 0. It logs it with how to replay it (name: the seed's flag).
func Seed(t testing.TB, s int64, name string) int64 {
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -%s=%d)", s, name, s)
	return s
}
