package jobraft_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/ctltest"
)

var (
	seedFlag = flag.Int64("jobraft.seed", 0, "seed of randomized tests (0: time)")
	longFlag = flag.Bool("jobraft.long", false, "run the long failover/linearizability rounds")
)

func TestMain(m *testing.M) {
	ctltest.MemberMain() // a child member process never returns from it
	flag.Parse()
	os.Exit(m.Run())
}

func seed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -jobraft.seed=%d)", s, s)
	return s
}
