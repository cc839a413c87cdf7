//go:build linux

// Package netrigtest starts netns rigs for tests: it builds netproxy once,
// skips a test on a machine that cannot host a rig (unless
// JOBRAFT_REQUIRE_NETNS=1, as in CI, makes that a failure), and closes the
// rig when the test ends, checking nothing of it is left.
package netrigtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/jobraft/jobraft/examples/internal/netrig"
)

var (
	buildOnce sync.Once
	proxyBin  string
	buildErr  error
)

// Proxy returns the netproxy binary, built once per test process.
func Proxy(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "netrig-bin-")
		if err != nil {
			buildErr = err
			return
		}
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/jobraft/jobraft/examples").Output()
		if err != nil {
			buildErr = err
			return
		}
		proxyBin, buildErr = netrig.Build(context.Background(), strings.TrimSpace(string(out)), dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return proxyBin
}

// Require skips t when this machine cannot host a rig, saying why; with
// JOBRAFT_REQUIRE_NETNS=1 it fails t instead.
func Require(t testing.TB) {
	t.Helper()
	if err := netrig.Supported(); err != nil {
		unsupported(t, err)
	}
}

func unsupported(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("JOBRAFT_REQUIRE_NETNS") == "1" {
		t.Fatalf("JOBRAFT_REQUIRE_NETNS=1 and %v", err)
	}
	t.Skipf("skipped: %v (run as root with ip(8); JOBRAFT_REQUIRE_NETNS=1 makes this a failure)", err)
}

// New starts a rig of members namespaces; it is closed at the end of t,
// which fails if any of its namespaces is left.
func New(t testing.TB, members int) *netrig.Rig {
	t.Helper()
	Require(t)
	if testing.Short() {
		t.Skip("builds network namespaces and proxies")
	}
	r, err := netrig.New(context.Background(), netrig.Options{Members: members, Dir: t.TempDir(), Proxy: Proxy(t)})
	if errors.Is(err, netrig.ErrUnsupported) {
		unsupported(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("rig close: %v", err)
		}
		left, err := netrig.Leftovers()
		if err != nil {
			t.Error(err)
		}
		for _, ns := range left {
			if strings.HasPrefix(ns, r.Prefix()) {
				t.Errorf("namespace %s left after the rig closed", ns)
			}
		}
	})
	return r
}
