//go:build linux

package netrig

import (
	"fmt"
	"os/exec"

	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// Placement puts cluster member i in namespace i: raft on every address
// there, advertising Addr(i); the API on Addr(i); the process started by
// ip netns exec.
func (r *Rig) Placement() cluster.Placement { return placement{r} }

type placement struct{ r *Rig }

var _ cluster.Placement = placement{}

func (p placement) Addrs(i int) (listen, advertise, http string, err error) {
	if i < 0 || i >= p.r.n {
		return "", "", "", fmt.Errorf("netrig: member %d placed, the rig has %d namespaces", i, p.r.n)
	}
	return p.r.RaftListen(i), p.r.RaftAddr(i), p.r.HTTPAddr(i), nil
}

func (p placement) Command(i int, bin string, args []string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", p.r.Namespace(i), bin}, args...)...)
}
