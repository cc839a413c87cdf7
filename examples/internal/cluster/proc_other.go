//go:build !linux

package cluster

import "syscall"

// sysProcAttr puts a member in its own process group: a terminal's ^C
// reaches only the demo, which stops the members itself.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
