//go:build linux

package netrig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ip runs ip(8) with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return &IPError{Args: args, Output: string(out), Err: err}
	}
	return nil
}

// namespaces lists the network namespaces ip(8) knows by name.
func namespaces() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		return nil, &IPError{Args: []string{"netns", "list"}, Output: string(out), Err: err}
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, sc.Err()
}

// killIn SIGKILLs every process in namespace ns.
func killIn(ns string) error {
	out, err := exec.Command("ip", "netns", "pids", ns).CombinedOutput()
	if err != nil {
		return &IPError{Args: []string{"netns", "pids", ns}, Output: string(out), Err: err}
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d in %s: %w", pid, ns, err)
			}
		}
	}
	return nil
}

// inNamespace runs f on an OS thread moved into namespace ns: sockets f
// creates belong to ns for good, wherever they are used afterwards. The
// thread is moved back before it runs anything else; if that fails it
// stays locked to its goroutine, and the runtime ends it with it.
func inNamespace(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := func() error {
			orig, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				return err
			}
			defer orig.Close()
			target, err := os.Open(filepath.Join("/run/netns", ns))
			if err != nil {
				return err
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("setns %s: %w", ns, err)
			}
			ferr := f()
			if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
				errc <- errors.Join(ferr, fmt.Errorf("setns back from %s: %w", ns, err))
				runtime.Goexit() // still locked: the thread ends with this goroutine
			}
			return ferr
		}()
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}
