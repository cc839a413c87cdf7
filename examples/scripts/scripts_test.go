// Package scripts holds the shell scripts of the examples; its test runs
// them.
package scripts

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// TestStartClusterScript runs start-cluster.sh as the README shows it
// (building jobd, certificates, token, three members with mTLS), submits a
// job through the public client and sees it succeed, then stop-cluster.sh
// stops every member (SIGTERM, exit) and the members' processes are gone.
func TestStartClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jobd and runs a 3-process cluster")
	}
	dir := t.TempDir()
	raftBase := freeRange(t, 20000+os.Getpid()%20000)
	httpBase := freeRange(t, raftBase+10)
	env := append(os.Environ(), "JOBD_RAFT_BASE="+strconv.Itoa(raftBase), "JOBD_HTTP_BASE="+strconv.Itoa(httpBase))
	start := exec.Command("sh", "start-cluster.sh", dir)
	start.Env = env
	out, err := start.CombinedOutput()
	if err != nil {
		t.Fatalf("start-cluster.sh: %v\n%s", err, out)
	}
	pids := readPids(t, dir)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	eps, err := os.ReadFile(filepath.Join(dir, "endpoints"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Endpoints: strings.Split(strings.TrimSpace(string(eps)), ","), Token: strings.TrimSpace(string(tok))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Every member ready, one leader.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms, err := cl.Members(ctx)
		ready := 0
		for _, m := range ms {
			if m.Status != nil && m.Status.Ready {
				ready++
			}
		}
		if err == nil && ready == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ready within 60s: %+v %v (logs in %s)", ms, err, dir)
		}
		time.Sleep(100 * time.Millisecond) // polling the status API
	}
	if _, err := cl.Submit(ctx, client.SubmitRequest{ID: "script-1", Queue: "default", Kind: "sha256", Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	for {
		j, err := cl.Get(ctx, "script-1", client.Linearizable)
		if err == nil && j.State == "succeeded" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job did not succeed: %+v %v", j, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the API
	}
	// The commands it prints name the real binary, and run as printed.
	ran := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], "jobctl") {
			continue
		}
		if !filepath.IsAbs(f[0]) {
			t.Fatalf("start-cluster.sh prints %q: not the binary's path", line)
		}
		if f[1] != "members" && f[1] != "help" {
			continue
		}
		cmd := exec.Command(f[0], f[1:]...)
		cmd.Env = append(os.Environ(), "JOBD_ENDPOINTS="+strings.TrimSpace(string(eps)), "JOBD_TOKEN="+strings.TrimSpace(string(tok)))
		if cout, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s as start-cluster.sh prints it: %v\n%s", line, err, cout)
		}
		ran++
	}
	if ran != 2 {
		t.Fatalf("start-cluster.sh printed %d runnable jobctl lines (members, help), want 2:\n%s", ran, out)
	}
	if !strings.Contains(string(out), "/console/") {
		t.Fatalf("start-cluster.sh does not say where the console is:\n%s", out)
	}
	stop := exec.Command("sh", "stop-cluster.sh", dir)
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("stop-cluster.sh: %v\n%s", err, out)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Fatalf("pid %d still running after stop-cluster.sh", pid)
		}
	}
}

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for i := 1; i <= 3; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d.pid", i)))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// freeRange returns a base port b >= from with b+1..b+3 free right now.
func freeRange(t *testing.T, from int) int {
	t.Helper()
	for b := from; b < 60000; b += 10 {
		ok := true
		for i := 1; i <= 3 && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(b+i))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return b
		}
	}
	t.Fatal("no free port range")
	return 0
}
