//go:build linux

package netrig

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupported: this machine cannot host the rig (not root, no ip(8), or
// the kernel or container refuses network namespaces). Tests skip on it,
// unless JOBRAFT_REQUIRE_NETNS=1 (CI) makes them fail.
var ErrUnsupported = errors.New("netrig: network namespaces unavailable")

// ErrClosed: the rig was closed.
var ErrClosed = errors.New("netrig: rig closed")

// IPError is an ip(8) command that failed: its arguments and what it
// printed.
type IPError struct {
	Args   []string
	Output string
	Err    error
}

func (e *IPError) Error() string {
	return fmt.Sprintf("ip %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Output))
}

func (e *IPError) Unwrap() error { return e.Err }

// exists reports whether ip refused because the name is taken.
func (e *IPError) exists() bool { return strings.Contains(e.Output, "File exists") }
