//go:build chaosbugs

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/internal/test/bugs"
)

// injected lists the bugs a chaos run catches within 50 seeds, with the
// checkers that may name each (docs/chaos.md, "Proving the checkers"):
//   - clamp is reached by the aimed deposed-leader composite (mute, a
//     lagging second follower, a stalled disk on the winner): the new
//     leader's appends to the deposed leader back off between reading its
//     last index and its commit index, and one carries a commit index past
//     what it verifies.
//   - floor is reached by the lying-disk composite (generate.go,
//     lyingDisk): entries the old leader committed with a follower whose
//     log lied vanish from a majority; when the old leader heals it is
//     asked to cut them. The guard refuses and the member reports
//     Diverged (honest passes); with the bug armed the cut goes through
//     and the member holds the new entries under a state machine that
//     applied the lost ones, and reports nothing: honest (it does not
//     report Diverged where the final log differs from what it applied),
//     digest and applied (the two states).
//   - early and batchearly (the state machine releases a dependent when
//     one parent succeeded; completes a batch when one member ended) are
//     reached by the dependency client (deps.go) in any run.
//   - clamp,floor: armed together, the truncation the clamp's stale
//     commit makes the guard refuse goes through: the member keeps a
//     state machine that applied an entry the log no longer holds
//     (digest, acked-set) instead of being stuck (convergence).
var injected = []struct {
	bug      string
	checkers []string
}{
	{"fencing", []string{"fencing", "linearizable"}},
	{"dedupe", []string{"acked-set", "linearizable"}},
	{"schedid", []string{"schedule"}},
	{"limit", []string{"limit"}},
	{"unique", []string{"unique"}},
	{"clamp", []string{"applied", "digest"}},
	{"clamp,floor", []string{"applied", "digest", "acked-set"}},
	{"floor", []string{"honest", "digest", "applied"}},
	{"early", []string{"deps-order"}},
	{"batchearly", []string{"batch-once"}},
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
