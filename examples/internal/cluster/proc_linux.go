package cluster

import "syscall"

// sysProcAttr puts a member in its own process group (a terminal's ^C
// reaches only the demo, which stops the members itself) and has the kernel
// SIGKILL it if the demo dies without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
