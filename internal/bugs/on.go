//go:build chaosbugs

package bugs

import "os"

var armed = os.Getenv(Env)

// On reports whether the bug name is armed (JOBRAFT_CHAOS_BUG=name).
func On(name string) bool { return armed == name }
