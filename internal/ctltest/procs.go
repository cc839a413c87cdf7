package ctltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/internal/stalltest"
	"github.com/jobraft/jobraft/raft"
)

// Procs is a cluster of child processes: the test binary re-executed as
// members (the test's TestMain must call MemberMain first). Each serves the
// member API (Handler) over HTTP on loopback. Members are killed with
// SIGKILL, paused with SIGSTOP: real crashes and real pauses. Each records
// its applied history to a file in its data dir; WaitConverged checks it
// while it polls (see CheckApplied).
type Procs struct {
	t      testing.TB
	Cfgs   []MemberConfig
	mu     sync.Mutex // guards cmds and exited: the chaos harness kills and starts while it polls
	cmds   []*exec.Cmd
	exited []chan struct{} // closed when member i's current process has exited
	logs   []string
	client *http.Client

	applied   *history.Checker
	appliedAt atomic.Int64 // unix ns of the last applied-history check of WaitConverged
}

// StartProcs starts an n-member child-process cluster; tweak may adjust
// each member's config. A member tweak marks Join is started empty and
// left out of the others' initial configuration: a spare that joins when
// the cluster adds it (POST /add).
func StartProcs(t testing.TB, n int, tweak func(i int, mc *MemberConfig)) *Procs {
	t.Helper()
	p := &Procs{t: t, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, applied: history.NewChecker()}
	base := t.TempDir()
	var members []raft.Member
	for i := 0; i < n; i++ {
		mc := MemberConfig{
			ID: fmt.Sprintf("p%d", i), DataDir: filepath.Join(base, fmt.Sprintf("p%d", i)),
			RaftAddr: nodetest.FreeAddr(t), HTTPAddr: nodetest.FreeAddr(t),
			LeaseTTL: 10 * time.Second, ExpireInterval: 100 * time.Millisecond,
		}
		if tweak != nil {
			tweak(i, &mc)
		}
		if !mc.Join { // a joiner (tweak set Join) waits, outside, to be added
			members = append(members, raft.Member{ID: mc.ID, Address: mc.RaftAddr, Voter: true})
		}
		p.Cfgs = append(p.Cfgs, mc)
	}
	p.cmds = make([]*exec.Cmd, n)
	p.exited = make([]chan struct{}, n)
	for i := range p.Cfgs {
		p.Cfgs[i].Members = members
		p.logs = append(p.logs, filepath.Join(base, p.Cfgs[i].ID+".log"))
		p.Start(i)
	}
	t.Cleanup(p.Close)
	return p
}

// StartJoiner starts one empty, not bootstrapped member id in a child
// process (MemberConfig.Join), for a running cluster (in this process or
// not) to add at p.Cfgs[0].RaftAddr; tweak may adjust its config. A
// member in its own process takes none of the test process's CPU: what
// it costs the cluster is what the cluster's members pay for it.
func StartJoiner(t testing.TB, id string, tweak func(mc *MemberConfig)) *Procs {
	t.Helper()
	p := &Procs{t: t, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, applied: history.NewChecker()}
	base := t.TempDir()
	mc := MemberConfig{
		ID: id, DataDir: filepath.Join(base, id), RaftAddr: nodetest.FreeAddr(t), HTTPAddr: nodetest.FreeAddr(t),
		LeaseTTL: 10 * time.Second, ExpireInterval: 100 * time.Millisecond, Join: true,
	}
	if tweak != nil {
		tweak(&mc)
	}
	p.Cfgs = []MemberConfig{mc}
	p.cmds, p.exited = make([]*exec.Cmd, 1), make([]chan struct{}, 1)
	p.logs = []string{filepath.Join(base, id+".log")}
	p.Start(0)
	t.Cleanup(p.Close)
	return p
}

// Start (re)starts member i's process from its data dir.
func (p *Procs) Start(i int) {
	p.t.Helper()
	spec, _ := json.Marshal(p.Cfgs[i])
	logf, err := os.OpenFile(p.logs[i], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envMember+"="+string(spec))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmds[i], p.exited[i] = cmd, done
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
}

// cmd returns member i's process (nil when it is not running) and its
// exit channel.
func (p *Procs) cmd(i int) (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmds[i], p.exited[i]
}

// Exited reports whether member i's process was started and has exited
// on its own (it was not killed): it crashed or refused to start.
func (p *Procs) Exited(i int) bool {
	cmd, exited := p.cmd(i)
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// Logs returns the path of each member's log file.
func (p *Procs) Logs() []string { return append([]string(nil), p.logs...) }

// Running reports whether member i's process is running.
func (p *Procs) Running(i int) bool { cmd, _ := p.cmd(i); return cmd != nil }

// Kill SIGKILLs member i and reaps it.
func (p *Procs) Kill(i int) {
	if cmd, exited := p.cmd(i); cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		p.mu.Lock()
		p.cmds[i] = nil
		p.mu.Unlock()
	}
}

// Pause SIGSTOPs member i; Resume SIGCONTs it.
// Pause SIGSTOPs member i and returns once the kernel reports the process
// stopped (state T in /proc/<pid>/stat; polled, at most 5 s), so what the
// caller measures from its return is time the member was really frozen: a
// signal is delivered asynchronously, and a request answered in between
// would measure nothing.
func (p *Procs) Pause(i int) {
	p.signal(i, syscall.SIGSTOP)
	cmd, _ := p.cmd(i)
	if cmd == nil {
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	WaitFor(p.t, 5*time.Second, "member "+strconv.Itoa(i)+" stopped", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return true // gone: nothing runs
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		k := bytes.LastIndexByte(b, ')')
		return k >= 0 && k+2 < len(b) && (b[k+2] == 'T' || b[k+2] == 't')
	})
}

// Resume SIGCONTs member i.
func (p *Procs) Resume(i int) { p.signal(i, syscall.SIGCONT) }

func (p *Procs) signal(i int, sig syscall.Signal) {
	if cmd, _ := p.cmd(i); cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Close kills every member; on failure it logs the tail of each log.
func (p *Procs) Close() {
	for i := range p.Cfgs {
		p.Kill(i)
	}
	if p.t.Failed() {
		for _, l := range p.logs {
			b, _ := os.ReadFile(l)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			p.t.Logf("--- %s (tail)\n%s", filepath.Base(l), b)
		}
	}
}

// Call sends req to member i's path and decodes the reply. An error means
// no reply (the member died or is paused): the outcome is unknown.
func (p *Procs) Call(ctx context.Context, i int, path string, req Request) (Reply, error) {
	return p.Post(ctx, i, path, req)
}

// Post sends any JSON body to member i's path and decodes the reply (as
// Call; the chaos harness posts a FaultSpec to /faults).
func (p *Procs) Post(ctx context.Context, i int, path string, req any) (Reply, error) {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.Cfgs[i].HTTPAddr+path, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	var rep Reply
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return rep, err
}

// CallT is Call with a timeout d.
func (p *Procs) CallT(i int, path string, req Request, d time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if req.Timeout == 0 {
		req.Timeout = d
	}
	return p.Call(ctx, i, path, req)
}

// Stall returns the scheduling stalls member i's process measured of
// itself within [from, to): its own stalltest watcher, which runs from
// the process's start (stalls before it are not known). The members run
// on this machine, so the instants of this process's clock are theirs. An
// error means no answer (the member died or is paused).
func (p *Procs) Stall(i int, from, to time.Time) (stalltest.Stall, error) {
	rep, err := p.CallT(i, "/stall", Request{StallFrom: from.UnixNano(), StallTo: to.UnixNano()}, 5*time.Second)
	if err == nil && rep.Stall == nil {
		err = fmt.Errorf("%s: /stall answered no stall: %+v", p.Cfgs[i].ID, rep)
	}
	if err != nil {
		return stalltest.Stall{}, err
	}
	return *rep.Stall, nil
}

// Leader returns the running member that reports itself leader in the
// highest term, or -1.
func (p *Procs) Leader() int {
	best, term := -1, uint64(0)
	for i := range p.cmds {
		if !p.Running(i) {
			continue
		}
		rep, err := p.CallT(i, "/status", Request{}, time.Second)
		if err == nil && rep.Role == "Leader" && rep.Term >= term {
			best, term = i, rep.Term
		}
	}
	return best
}

// WaitLeader waits until a leader can serve a linearizable read and
// returns it.
func (p *Procs) WaitLeader(d time.Duration) int {
	p.t.Helper()
	var l int
	WaitFor(p.t, d, "a leader of the process cluster", func() bool {
		l = p.Leader()
		if l < 0 {
			return false
		}
		rep, err := p.CallT(l, "/get", Request{ID: "none"}, time.Second)
		return err == nil && rep.Outcome == OutcomeOK
	})
	return l
}

// WaitConverged waits until every running member reports the same applied
// index, and returns it.
func (p *Procs) WaitConverged(d time.Duration) uint64 {
	p.t.Helper()
	var idx uint64
	deadline := time.Now().Add(d)
	WaitFor(p.t, d, "members to converge", func() bool {
		p.failOnApplied(time.Until(deadline) < appliedCheckEvery)
		idx = 0
		for i := range p.Cfgs {
			if !p.Running(i) {
				continue
			}
			rep, err := p.CallT(i, "/status", Request{}, time.Second)
			if err != nil || (idx != 0 && rep.Applied != idx) {
				return false
			}
			idx = rep.Applied
		}
		return idx != 0
	})
	return idx
}
