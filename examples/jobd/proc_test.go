package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jobdcluster "github.com/jobraft/jobraft/examples/internal/cluster"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// jobdBinary builds jobd once per test run.
func jobdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs jobd processes")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobd-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "jobd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is one jobd process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	http   string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc runs jobd with args; it is SIGKILLed at cleanup if still running.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	p.cmd.Env = append(os.Environ(), "JOBD_TOKEN="+testToken)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	for i, a := range args {
		if a == "-http-addr" {
			p.http = "http://" + args[i+1]
		}
	}
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("jobd did not exit within %v; output:\n%s", within, p.stderr)
		return -1
	}
}

// waitReady polls /readyz until 200.
func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	waitReadyURL(t, p.http, p.done, p.stderr)
}

// waitReadyURL polls base/readyz until 200, failing if done closes first.
func waitReadyURL(t *testing.T, base string, done <-chan struct{}, out fmt.Stringer) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if resp, err := c.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("jobd exited:\n%s", out)
		case <-tick.C:
		}
	}
	t.Fatalf("%s not ready within 30s:\n%s", base, out)
}

func TestHelpExitsZero(t *testing.T) {
	bin := jobdBinary(t)
	for _, args := range [][]string{{"-h"}, {"-help"}, {"gencerts", "-h"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage") {
			t.Errorf("jobd %v: %v, want exit 0 with the usage; output:\n%s", args, err, out)
		}
	}
	var ee *exec.ExitError
	if _, err := exec.Command(bin, "-no-such-flag").CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("an unknown flag: %v, want exit 2", err)
	}
}

// TestSecondProcessOnDataDir: a second jobd on a data dir in use exits 1 at
// once, naming the pid that holds it.
func TestSecondProcessOnDataDir(t *testing.T) {
	bin := jobdBinary(t)
	dir := t.TempDir()
	first := startProc(t, bin, "-id", "p1", "-data", dir, "-raft-addr", freeAddr(t), "-http-addr", freeAddr(t))
	first.waitReady(t)
	second := startProc(t, bin, "-id", "p1", "-data", dir, "-raft-addr", freeAddr(t), "-http-addr", freeAddr(t))
	if code := second.wait(t, 10*time.Second); code != 1 {
		t.Fatalf("second jobd exited %d, want 1:\n%s", code, second.stderr)
	}
	want := fmt.Sprintf("in use by pid %d", first.cmd.Process.Pid)
	if !strings.Contains(second.stderr.String(), want) {
		t.Fatalf("second jobd's output does not say %q:\n%s", want, second.stderr)
	}
}

func fdCount(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestManySlowConnectionsBoundedFDs: hundreds of connections that send a
// request head and then stall, half of them without a token, never hold
// more of jobd's file descriptors than -max-conns, each is ended by jobd
// within its read timeout, and jobd serves again afterwards.
func TestManySlowConnectionsBoundedFDs(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	bin := jobdBinary(t)
	const maxConns, conns = 32, 400
	httpAddr := freeAddr(t)
	p := startProc(t, bin, "-id", "p1", "-data", t.TempDir(), "-raft-addr", freeAddr(t), "-http-addr", httpAddr,
		"-max-conns", fmt.Sprint(maxConns), "-read-timeout", "1s", "-workers=false")
	p.waitReady(t)
	pid := p.cmd.Process.Pid
	base := fdCount(t, pid)

	var wg sync.WaitGroup
	ended := make(chan error, conns)
	for i := range conns {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		auth := ""
		if i%2 == 0 {
			auth = "Authorization: Bearer " + testToken + "\r\n"
		}
		head := "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n" + auth + "\r\n{\"queue\":"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// jobd must end every connection: reply and close.
			_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
			_, err := io.ReadAll(c)
			ended <- err
		}()
	}
	// Sample jobd's descriptors while the connections are pending.
	peak := 0
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
sample:
	for {
		select {
		case <-all:
			break sample
		case <-tick.C:
			peak = max(peak, fdCount(t, pid))
		}
	}
	close(ended)
	t.Logf("fds: base %d, peak %d with %d stalled connections, -max-conns %d", base, peak, conns, maxConns)
	stuck := 0
	for err := range ended {
		if err != nil {
			stuck++
		}
	}
	if stuck > 0 {
		t.Errorf("%d of %d stalled connections were not ended by jobd within 90s", stuck, conns)
	}
	// A few descriptors of slack: the runtime, the raft timers, a scrape.
	if limit := base + maxConns + 8; peak > limit {
		t.Errorf("jobd held %d descriptors with %d stalled connections (base %d, -max-conns %d)", peak, conns, base, maxConns)
	}
	p.waitReady(t)
}

// TestGracefulStopLogsNoErrors: SIGTERM of a member of a running 3-member
// cluster exits 0 without logging errors of its own shutdown, and no dial
// error names its address twice.
func TestGracefulStopLogsNoErrors(t *testing.T) {
	bin := jobdBinary(t)
	c, err := jobdcluster.New(context.Background(), jobdcluster.Options{Dir: t.TempDir(), Members: 3}, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		waitReadyURL(t, "http://"+m.HTTPAddr, nil, logFile(m.LogPath))
	}
	st, err := c.Members[0].Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	follower := 0
	for i, m := range c.Members {
		if m.ID != st.LeaderID {
			follower = i
		}
	}
	// Raft traffic flows into the follower until it stops.
	if err := c.Stop(follower, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range c.Members {
		if i != follower {
			if err := c.Stop(i, 20*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, m := range c.Members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if i == follower && strings.Contains(line, "[ERROR]") {
				t.Errorf("%s (stopped first) logged: %s", m.ID, line)
			}
			if strings.Contains(line, "use of closed network connection") {
				t.Errorf("%s logged its own closed connection: %s", m.ID, line)
			}
			for _, other := range c.Members {
				if strings.Count(line, "dial tcp "+other.RaftAddr) > 1 {
					t.Errorf("%s logged a dial error naming the address twice: %s", m.ID, line)
				}
			}
		}
	}
}

// logFile prints a log file's content.
type logFile string

func (f logFile) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}
