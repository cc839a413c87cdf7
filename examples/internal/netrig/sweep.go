//go:build linux

package netrig

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// rigName matches the namespaces rigs create: jobraft-<slot>-<pid>-hub and
// jobraft-<slot>-<pid>-n<m>.
var rigName = regexp.MustCompile(`^jobraft-([0-9]+)-([0-9]+)-(hub|n[0-9]+)$`)

// Leftovers lists every rig namespace on this machine, live rigs' too.
func Leftovers() ([]string, error) {
	names, err := namespaces()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if rigName.MatchString(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Sweep removes the namespaces of rigs whose process is gone (killed
// before its Close ran), and the processes still in them.
func Sweep() error {
	names, err := Leftovers()
	if err != nil {
		return err
	}
	var errs []error
	var hubs []int
	for _, n := range names {
		sub := rigName.FindStringSubmatch(n)
		pid, _ := strconv.Atoi(sub[2])
		if alive(pid) {
			continue
		}
		if sub[3] == "hub" {
			slot, _ := strconv.Atoi(sub[1])
			hubs = append(hubs, slot)
		}
		if err := killIn(n); err != nil {
			errs = append(errs, err)
		}
		if err := ip("netns", "del", n); err != nil {
			errs = append(errs, fmt.Errorf("sweep a dead rig's namespace: %w", err))
		}
	}
	for _, slot := range hubs {
		errs = append(errs, waitLinkGone(rootLink(slot), 10*time.Second))
	}
	return errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
