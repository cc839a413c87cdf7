package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// Proc is the child-process runner: one member process, started from a
// command line, crashed for real (Kill: SIGKILL, no deferred code runs),
// frozen for real (Pause: SIGSTOP) and stopped gracefully (Stop: its stdin
// closes, then StopSignal). Every member kind that runs as a process — a
// raft node or a controller re-executed from the test binary, a jobd —
// runs on one. Its methods are safe for concurrent use and report
// failures as errors: the jobd demo, no test, runs its members on it too.
type Proc struct {
	Name string
	Path string   // the program
	Args []string // its arguments (without the program)
	Env  []string // added to this process's environment
	// LogPath receives the process's stdout and stderr (appended to).
	LogPath string
	// StopSignal is sent by Stop after the stdin closes (nil: none, the
	// process ends when its stdin does).
	StopSignal os.Signal
	// SysProcAttr, when set, is the process's exec.Cmd.SysProcAttr.
	SysProcAttr *syscall.SysProcAttr

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	exited  chan struct{} // closed when the current process has exited
	exitErr error
	asked   bool // the exit was asked for (Kill or Stop)
}

// ErrNotRunning: the process was not started, or was killed or stopped.
var ErrNotRunning = errors.New("clustertest: process not running")

// Start starts the process (again, after a Kill or Stop). It fails when
// the process runs.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("clustertest: start %s: it is running", p.Name)
		}
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = p.SysProcAttr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clustertest: start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.stdin, p.exited, p.exitErr, p.asked = cmd, stdin, exited, nil, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// current returns the process (nil when not started, killed or stopped)
// and its exit channel.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// Up reports whether the process was started and not killed or stopped:
// a process that died on its own is still up (its silence fails the
// cluster's waits; Died names it).
func (p *Proc) Up() bool { cmd, _ := p.current(); return cmd != nil }

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	cmd, exited := p.current()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Died reports a process that exited without being asked to (a crash, a
// refusal to start, a race report), with its exit error.
func (p *Proc) Died() (bool, error) {
	p.mu.Lock()
	cmd, exited, asked := p.cmd, p.exited, p.asked
	p.mu.Unlock()
	if cmd == nil || asked {
		return false, nil
	}
	select {
	case <-exited:
		return true, p.ExitErr()
	default:
		return false, nil
	}
}

// ExitErr is the last process's exit error.
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Exited returns a channel closed when the current process has exited
// (nil when none was started).
func (p *Proc) Exited() <-chan struct{} { _, exited := p.current(); return exited }

// ask marks the coming exit as asked for and returns the process, nil
// when none runs.
func (p *Proc) ask() (*exec.Cmd, chan struct{}, io.WriteCloser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, nil, nil
	}
	p.asked = true
	return p.cmd, p.exited, p.stdin
}

// reaped forgets the exited process.
func (p *Proc) reaped() {
	p.mu.Lock()
	p.cmd = nil
	p.mu.Unlock()
}

// Kill SIGKILLs the process (paused or not) and waits for it to be gone.
// It does nothing when no process runs.
func (p *Proc) Kill() error {
	cmd, exited, _ := p.ask()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	p.reaped()
	return nil
}

// Stop ends the process gracefully: it closes its stdin, sends
// StopSignal, and waits up to timeout for it to exit, then SIGKILLs it.
// An exit that had to be forced or was not clean (non-zero: a race report
// exits 66) is an error.
func (p *Proc) Stop(timeout time.Duration) error {
	cmd, exited, stdin := p.ask()
	if cmd == nil {
		return nil
	}
	defer p.reaped()
	stdin.Close()
	if p.StopSignal != nil {
		if err := cmd.Process.Signal(p.StopSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("%s did not exit within %v of its stop: killed (log: %s)", p.Name, timeout, p.LogPath)
	}
	if err := p.ExitErr(); err != nil {
		return fmt.Errorf("%s exited after its stop with %v (log: %s)", p.Name, err, p.LogPath)
	}
	return nil
}

// pauseBound bounds the wait for a paused process to be stopped.
const pauseBound = 5 * time.Second

// Pause SIGSTOPs the process: it keeps its sockets and state but runs no
// code (a stalled VM, a long GC pause) until Resume. It returns once the
// kernel reports the process stopped (state T in /proc/<pid>/stat, where
// there is one; polled, at most 5 s widened by this process's own
// scheduling stalls), so what the caller measures from its
// return is time the process was really frozen: a signal is delivered
// asynchronously. Kill works on a paused process; Stop does not.
func (p *Proc) Pause() error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("%w: pause %s", ErrNotRunning, p.Name)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	w := stalltest.Start()
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // gone, or no /proc: nothing runs, or nothing to poll
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if k := bytes.LastIndexByte(b, ')'); k >= 0 && k+2 < len(b) && (b[k+2] == 'T' || b[k+2] == 't') {
			return nil
		}
		if w.Exceeded(pauseBound) {
			return fmt.Errorf("clustertest: %s not stopped %s after SIGSTOP", p.Name, w.Report(pauseBound))
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// Resume SIGCONTs a process stopped by Pause.
func (p *Proc) Resume() error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("%w: resume %s", ErrNotRunning, p.Name)
	}
	return cmd.Process.Signal(syscall.SIGCONT)
}

// LogTail returns the last n bytes of the process's log.
func (p *Proc) LogTail(n int) []byte {
	b, _ := os.ReadFile(p.LogPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return b
}
