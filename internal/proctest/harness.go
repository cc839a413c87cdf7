package proctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/internal/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// Harness starts, kills and restarts member processes and talks to them
// through their control RPC. Every member records its applied history to
// a file in its data dir (HistoryPath); the convergence wait checks it
// while it polls and fails the test at once on a violation (CheckApplied).
type Harness struct {
	t       testing.TB
	client  *transport.Mux // only dials
	Members []*Member

	applied   *history.Checker
	appliedAt atomic.Int64 // unix ns of the last applied-history check of a convergence wait
}

// Member is one child member process.
type Member struct {
	h   *Harness
	Cfg ChildConfig

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	exited  chan struct{} // closed when the current process has exited
	exitErr error
	killed  bool // the exit was asked for (kill or stop)
}

// Errors of the control RPC, besides the proposal classes of package raft.
var (
	// ErrUnclassified: a proposal error matched neither raft.ErrRejected nor
	// raft.ErrIndeterminate (a contract violation the tests report).
	ErrUnclassified = errors.New("proctest: proposal error of no class")
)

// FastChild returns a child config with the test timeouts of
// nodetest.FastConfig (heartbeat and election 150ms).
func FastChild(t testing.TB, id, dir string) ChildConfig {
	fc := nodetest.FastConfig(t, id, dir, "")
	return ChildConfig{
		ID: id, DataDir: dir,
		BindAddr: nodetest.FreeAddr(t), CtlAddr: nodetest.FreeAddr(t),
		LogFile:          dir + ".log",
		HeartbeatTimeout: fc.HeartbeatTimeout, ElectionTimeout: fc.ElectionTimeout,
		LeaderLeaseTimeout: fc.LeaderLeaseTimeout, CommitTimeout: fc.CommitTimeout,
		ApplyTimeout: fc.ApplyTimeout, TrailingLogs: fc.TrailingLogs,
		SnapshotThreshold: fc.SnapshotThreshold, SnapshotInterval: fc.SnapshotInterval,
	}
}

// New returns a harness; everything it starts is killed at cleanup.
func New(t testing.TB) *Harness {
	t.Helper()
	client, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{t: t, client: client, applied: history.NewChecker()}
	t.Cleanup(func() {
		for _, m := range h.Members {
			m.Kill()
		}
		client.Close()
	})
	return h
}

// StartCluster bootstraps an n-member cluster of child processes (m0..).
func (h *Harness) StartCluster(n int, tweak func(*ChildConfig)) []*Member {
	h.t.Helper()
	base := h.t.TempDir()
	var cfgs []ChildConfig
	var members []raft.Member
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%d", i)
		cc := FastChild(h.t, id, filepath.Join(base, id))
		cc.Bootstrap = true
		if tweak != nil {
			tweak(&cc)
		}
		cfgs = append(cfgs, cc)
		members = append(members, raft.Member{ID: id, Address: cc.BindAddr, Voter: true})
	}
	var out []*Member
	for _, cc := range cfgs {
		cc.InitialMembers = members
		out = append(out, h.Start(cc))
	}
	return out
}

// Start starts a member process and waits until its control RPC answers.
func (h *Harness) Start(cc ChildConfig) *Member {
	h.t.Helper()
	m := &Member{h: h, Cfg: cc}
	h.Members = append(h.Members, m)
	m.Restart()
	return m
}

// Restart starts the member's process again from its data dir (the member
// must not be running) and waits until its control RPC answers.
func (m *Member) Restart() {
	t := m.h.t
	t.Helper()
	spec, err := json.Marshal(m.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvMember+"="+string(spec), "GORACE=halt_on_error=1 exitcode=66")
	logf, err := os.OpenFile(m.Cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", m.Cfg.ID, err)
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.stdin, m.exited, m.exitErr, m.killed = cmd, stdin, exited, nil, false
	m.mu.Unlock()
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		m.exitErr = err
		m.mu.Unlock()
		close(exited)
	}()
	const startBound = 30 * time.Second
	w := stalltest.Start()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := m.Status(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited during start (%v); its log: %s", m.Cfg.ID, m.ExitErr(), m.Cfg.LogFile)
		default:
		}
		if w.Exceeded(startBound) {
			t.Fatalf("%s: control RPC not answering after %s: %v; its log: %s", m.Cfg.ID, w.Report(startBound), err, m.Cfg.LogFile)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// Kill SIGKILLs the member's process and waits for it to be gone. It is a
// no-op when the process is not running.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	if cmd == nil {
		m.mu.Unlock()
		return
	}
	m.killed = true
	m.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	m.mu.Lock()
	m.cmd = nil
	m.mu.Unlock()
}

// Stop closes the member's stdin (it closes its node gracefully and exits)
// and waits for it; a non-zero exit (a race report: exit code 66) fails the
// test.
func (m *Member) Stop() {
	m.mu.Lock()
	cmd, exited, stdin := m.cmd, m.exited, m.stdin
	if cmd == nil {
		m.mu.Unlock()
		return
	}
	m.killed = true
	m.mu.Unlock()
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	if err := m.ExitErr(); err != nil {
		m.h.t.Errorf("%s exited with %v; its log: %s", m.Cfg.ID, err, m.Cfg.LogFile)
	}
	m.mu.Lock()
	m.cmd = nil
	m.mu.Unlock()
}

// Running reports whether the process is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Died reports a process that exited without being asked to (a crash, a
// race report), with its exit error.
func (m *Member) Died() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.killed {
		return false, nil
	}
	select {
	case <-m.exited:
		return true, m.exitErr
	default:
		return false, nil
	}
}

// ExitErr is the last process's exit error.
func (m *Member) ExitErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exitErr
}

func (m *Member) call(ctx context.Context, method string, req []byte, out any) error {
	reply, err := m.h.client.Call(ctx, m.Cfg.CtlAddr, method, req)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply, out)
}

// Status is the member's raft.Status.
func (m *Member) Status(ctx context.Context) (raft.Status, error) {
	var s raft.Status
	err := m.call(ctx, methodStatus, nil, &s)
	return s, err
}

// Propose proposes cmd on the member (forwarded to the leader when it is a
// follower). A nil error means committed; otherwise the error matches
// raft.ErrRejected (nothing happened: the member's node said so, or the
// control call never reached a handler), raft.ErrIndeterminate (the node
// said so, or the control call was sent and its reply lost — e.g. the
// member was killed) or ErrUnclassified.
func (m *Member) Propose(ctx context.Context, cmd []byte) (uint64, error) {
	var rep proposeReply
	if err := m.call(ctx, methodPropose, cmd, &rep); err != nil {
		if transport.IsNotDelivered(err) {
			return 0, fmt.Errorf("%w: control call to %s not delivered: %w", raft.ErrRejected, m.Cfg.ID, err)
		}
		return 0, fmt.Errorf("%w: control call to %s: %w", raft.ErrIndeterminate, m.Cfg.ID, err)
	}
	switch rep.Class {
	case classOK:
		return rep.Index, nil
	case classRejected:
		return 0, fmt.Errorf("%w: %s: %s", raft.ErrRejected, m.Cfg.ID, rep.Err)
	case classIndeterminate:
		return 0, fmt.Errorf("%w: %s: %s", raft.ErrIndeterminate, m.Cfg.ID, rep.Err)
	default:
		return 0, fmt.Errorf("%w: %s: %s", ErrUnclassified, m.Cfg.ID, rep.Err)
	}
}

// Read runs a linearizable read on the member and returns key's value.
func (m *Member) Read(ctx context.Context, key string) (value string, found bool, index uint64, err error) {
	var rep readReply
	if err := m.call(ctx, methodRead, []byte(key), &rep); err != nil {
		return "", false, 0, err
	}
	return rep.Value, rep.Found, rep.Index, nil
}

// Dump returns every key of the member's KV with its value and write count.
func (m *Member) Dump(ctx context.Context) (map[string]nodetest.Entry, error) {
	var out map[string]nodetest.Entry
	err := m.call(ctx, methodDump, nil, &out)
	return out, err
}

// Leader polls the running members until one reports itself leader in a
// term above minTerm, and returns it with its status.
func (h *Harness) Leader(d time.Duration, minTerm uint64) (*Member, raft.Status) {
	h.t.Helper()
	var leader *Member
	var st raft.Status
	nodetest.WaitFor(h.t, d, fmt.Sprintf("a leader in a term above %d", minTerm), func() bool {
		leader = nil
		for _, m := range h.Members {
			if !m.Running() {
				continue
			}
			s, err := m.statusQuick()
			if err == nil && s.Role == "Leader" && s.Term > minTerm && (leader == nil || s.Term > st.Term) {
				leader, st = m, s
			}
		}
		return leader != nil
	})
	return leader, st
}

func (m *Member) statusQuick() (raft.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return m.Status(ctx)
}

// WaitConverged waits until the given members (all running members when
// none are given) report the same commit index, last index, applied index
// and digest, and returns their common status.
func (h *Harness) WaitConverged(d time.Duration, members ...*Member) raft.Status {
	h.t.Helper()
	if len(members) == 0 {
		for _, m := range h.Members {
			if m.Running() {
				members = append(members, m)
			}
		}
	}
	var last []raft.Status
	var first raft.Status
	w := stalltest.Start()
	for {
		h.failOnApplied(false)
		last = last[:0]
		ok := true
		for _, m := range members {
			s, err := m.statusQuick()
			if err != nil {
				ok = false
				break
			}
			last = append(last, s)
		}
		if ok && len(last) > 0 {
			first = last[0]
			for _, s := range last[1:] {
				if s.CommitIndex != first.CommitIndex || s.LastIndex != first.LastIndex ||
					s.AppliedIndex != first.AppliedIndex || s.Digest != first.Digest {
					ok = false
				}
			}
			if ok && first.Digest.Index > 0 {
				h.failOnApplied(true)
				return first
			}
		}
		if w.Exceeded(d) {
			h.failOnApplied(true)
			for _, s := range last {
				h.t.Logf("%s: role %s term %d first %d last %d/%d commit %d applied %d floor %d digest %d/%x",
					s.ID, s.Role, s.Term, s.FirstIndex, s.LastIndex, s.LastTerm, s.CommitIndex, s.AppliedIndex, s.Floor, s.Digest.Index, s.Digest.Sum[:4])
			}
			h.t.Fatalf("members did not converge after %s", w.Report(d))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// CheckAlive fails the test for any member that died without being asked.
func (h *Harness) CheckAlive() {
	h.t.Helper()
	for _, m := range h.Members {
		if died, err := m.Died(); died {
			h.t.Errorf("%s died unexpectedly (%v); its log: %s", m.Cfg.ID, err, m.Cfg.LogFile)
		}
	}
}

// Pause SIGSTOPs the member's process: it keeps its sockets and state but
// runs no code (a stalled VM, a long GC pause, a debugger) until Resume.
// Control RPCs to it block until it resumes or their context ends. Kill
// still works on a paused process; Stop does not (resume it first).
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume SIGCONTs a process stopped by Pause.
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("proctest: %s is not running", m.Cfg.ID)
	}
	return syscall.Kill(cmd.Process.Pid, sig)
}
