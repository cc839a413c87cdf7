package jobraft_test

import (
	"flag"
	"testing"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

var (
	seedFlag = flag.Int64("jobraft.seed", 0, "seed of randomized tests (0: time)")
	longFlag = flag.Bool("jobraft.long", false, "run the long failover/linearizability rounds")
)

func TestMain(m *testing.M) { clustertest.Main(m) }

func seed(t *testing.T) int64 { return clustertest.Seed(t, *seedFlag, "jobraft.seed") }
