package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// The binaries, built once per test process.
var (
	binOnce                 sync.Once
	binErr                  error
	jobdBin, walcmp, ctlBin string
)

func binaries(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds jobd and jobctl and runs 3-process clusters")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobctl-test-bin-")
		if err != nil {
			binErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		module := filepath.Join(filepath.Dir(file), "..", "..")
		if jobdBin, walcmp, binErr = cluster.Build(context.Background(), module, dir); binErr != nil {
			return
		}
		ctlBin = filepath.Join(dir, "bin", "jobctl")
		cmd := exec.Command("go", "build", "-o", ctlBin, "./cmd/jobctl")
		cmd.Dir = module
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build jobctl: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
}

// startCluster starts a 3-member jobd cluster (plain TCP on loopback) in
// dir with extra flags, waits until every member is ready, and returns it
// with a client over every member. before runs on each member before it
// starts (jobd restore).
func startCluster(t *testing.T, dir string, flags []string, before func(c *cluster.Cluster, m *cluster.Member)) (*cluster.Cluster, *client.Client) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(context.Background(), cluster.Options{Dir: dir, Members: 3, Flags: flags}, jobdBin, walcmp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i, m := range c.Members {
		if before != nil {
			before(c, m)
		}
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, c)
	return c, c.Client()
}

// waitReady polls every member's status until all are ready and agree on
// a leader.
func waitReady(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		leaders := map[string]bool{}
		ready := 0
		for _, m := range c.Members {
			st, err := m.Status(context.Background())
			if err == nil && st.Ready {
				ready++
				leaders[st.LeaderID] = true
			}
		}
		if ready == len(c.Members) && len(leaders) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster in %s not ready within 60s (%d ready, leaders %v); logs: %s", c.Opts.Dir, ready, leaders, c.Members[0].LogPath)
		}
		time.Sleep(100 * time.Millisecond) // polling the status API
	}
}

// endpoints is the -endpoints value for c.
func endpoints(c *cluster.Cluster) string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, "http://"+m.HTTPAddr)
	}
	return strings.Join(eps, ",")
}

// jobctl runs the built binary and returns its stdout, stderr and exit
// status.
func jobctl(t *testing.T, c *cluster.Cluster, args ...string) (string, string, int) {
	t.Helper()
	all := args
	if c != nil {
		all = append([]string{"-endpoints", endpoints(c), "-token-file", filepath.Join(c.Opts.Dir, "token")}, args...)
	}
	cmd := exec.Command(ctlBin, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("jobctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// mustJSON runs jobctl -json, requires exit 0 and decodes stdout into v.
func mustJSON(t *testing.T, c *cluster.Cluster, v any, args ...string) {
	t.Helper()
	out, errs, code := jobctl(t, c, append(args, "-json")...)
	if code != 0 {
		t.Fatalf("jobctl %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("jobctl %v: output %q: %v", args, out, err)
	}
}

// waitState polls jobctl get until the job is in state.
func waitState(t *testing.T, c *cluster.Cluster, id, state string) client.Job {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var j client.Job
		mustJSON(t, c, &j, "get", id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: state %s, want %s within 30s", id, j.State, state)
		}
		time.Sleep(100 * time.Millisecond) // polling the API
	}
}
