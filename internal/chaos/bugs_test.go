//go:build chaosbugs

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/internal/bugs"
)

// injected lists the bugs a chaos run reliably catches within 50 seeds,
// with the checkers that may name each. Not here (docs/chaos.md, "Proving
// the checkers"):
//   - clamp: hashicorp/raft builds the harmful append (PrevLogEntry N, no
//     entries, LeaderCommitIndex > N, to a deposed leader still holding an
//     uncommitted N+1) only when a new leader's first replication reads
//     its last index before its no-op is stored and its commit index after
//     the no-op committed: a scheduling race inside one goroutine that no
//     fault schedule can aim at. The deposed-leader composite (mute leader)
//     makes the shape around it common; seeds 1..50 still caught none.
//     raft.TestCraftedCommitAheadOfVerifiedAppendIsClamped catches it every
//     time.
//   - floor: nothing asks the guard to cut at or below the commit floor
//     unless another bug does (armed with clamp, JOBRAFT_CHAOS_BUG=clamp,floor,
//     seeds 1..50 caught nothing either);
//     wal.TestHistoricTruncationAtOrBelowFloorRefused fails with it armed.
var injected = []struct {
	bug      string
	checkers []string
}{
	{"fencing", []string{"fencing", "linearizable"}},
	{"dedupe", []string{"acked-set", "linearizable"}},
	{"clamp", []string{"applied", "digest"}},
}

// TestInjectedBugs (go test -tags chaosbugs; make chaos-bugs) arms each
// bug in the member processes and runs the CI budget's seeds until one is
// caught by a checker that names it: within 50 seeds, or the test fails.
func TestInjectedBugs(t *testing.T) {
	for _, c := range injected {
		t.Run(c.bug, func(t *testing.T) {
			t.Setenv(bugs.Env, c.bug)
			for seed := uint64(1); seed <= 50; seed++ {
				var res Result
				t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
					res = Run(t, Generate(seed, GenOptions{}), Options{PictureDir: filepath.Join(os.TempDir(), "jobraft-chaos", "bug-"+c.bug)})
				})
				for _, v := range res.Failed() {
					if slices.Contains(c.checkers, v.Checker) {
						fmt.Printf("chaos bug %s: caught at seed %d by %s: %s\n", c.bug, seed, strings.Join(res.Checkers(), ","), v)
						return
					}
				}
			}
			t.Errorf("bug %s: not caught within 50 seeds", c.bug)
		})
	}
}
