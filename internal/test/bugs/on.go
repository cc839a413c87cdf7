//go:build chaosbugs

package bugs

import (
	"os"
	"slices"
	"strings"
)

var armed = strings.Split(os.Getenv(Env), ",")

// On reports whether the bug name is armed (JOBRAFT_CHAOS_BUG=name, or a
// comma-separated list of names to arm several together).
func On(name string) bool { return slices.Contains(armed, name) }
