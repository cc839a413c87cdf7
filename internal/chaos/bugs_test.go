//go:build chaosbugs

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jobraft/jobraft/internal/bugs"
)

// caught records, per injected bug, the seed of the CI budget that caught
// it first and the checker that named it (make chaos-bugs finds them; see
// docs/chaos.md). A bug no seed of the budget catches has no entry.
var caught = []struct {
	bug     string
	seed    uint64
	checker string
}{
	{"fencing", 1, "fencing"},
	{"dedupe", 1, "acked-set"},
	{"clamp", 32, "applied"},
}

// TestInjectedBugs (go test -tags chaosbugs) runs each bug's catching seed
// with the bug armed in the member processes: the named checker must fail
// it (up to three tries: the workload's timing is not replayed).
func TestInjectedBugs(t *testing.T) {
	for _, c := range caught {
		t.Run(c.bug, func(t *testing.T) {
			t.Setenv(bugs.Env, c.bug)
			s := Generate(c.seed, GenOptions{})
			for try := 1; try <= 3; try++ {
				var res Result
				t.Run(fmt.Sprintf("try-%d", try), func(t *testing.T) {
					res = Run(t, s, Options{PictureDir: filepath.Join(os.TempDir(), "jobraft-chaos", "bug-"+c.bug)})
				})
				t.Logf("bug %s, seed %d, try %d: %s", c.bug, c.seed, try, line(res))
				if slices.Contains(res.Checkers(), c.checker) {
					return
				}
			}
			t.Errorf("bug %s: seed %d was not caught by %s in 3 tries", c.bug, c.seed, c.checker)
		})
	}
}
