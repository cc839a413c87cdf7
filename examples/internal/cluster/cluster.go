// Package cluster runs a local jobd cluster as child processes on loopback:
// it builds the binaries, generates throwaway mTLS certificates, starts,
// SIGKILLs, restarts and stops members on the test cluster's child-process
// runner (clustertest.Proc), and reads their state only through the HTTP
// API (never from log text). The demo and the examples' end-to-end test
// share it.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Options configures a cluster.
type Options struct {
	Dir     string // everything lives here: bin/, certs/, token, n1/ (data), n1.log, ...
	Members int    // default 3
	TLS     bool   // mTLS between members (throwaway certificates)
	// Extra flags for every member, e.g. -lease-ttl 5s.
	Flags []string
	// Spares are members prepared (addresses, certificates) but not part
	// of the initial cluster: started with -join, added through the API
	// (grow.go).
	Spares int
	// Placement puts members elsewhere than on loopback (a network
	// namespace each); nil: loopback, ports free at New.
	Placement Placement
}

// Placement decides where member i (0-based; the spares follow the
// initial members) listens and how its process is started.
type Placement interface {
	// Addrs returns the member's raft listen address, the address peers
	// dial (its -advertise and the host its certificate is issued for),
	// and its HTTP API address.
	Addrs(i int) (listen, advertise, http string, err error)
	// Command returns the command that runs bin with args as member i.
	Command(i int, bin string, args []string) *exec.Cmd
}

// Member is one jobd process.
type Member struct {
	ID        string
	RaftAddr  string // listen address
	Advertise string // the address peers dial: RaftAddr unless placed
	HTTPAddr  string
	DataDir   string
	LogPath   string
	Client    *client.Client // this member only
	// join is the cluster ID a spare joins (started with -join); "" for an
	// initial member.
	join string
	slot int // index for Options.Placement
	proc *clustertest.Proc
}

// Cluster is a set of jobd members.
type Cluster struct {
	Opts    Options
	Bin     string // jobd binary
	WalCmp  string // walcompare binary
	Token   string
	Members []*Member
	Spares  []*Member // not started until StartSpare
	peers   string
}

// Build compiles jobd and the walcompare CLI into dir/bin. moduleDir is
// the examples module's directory.
func Build(ctx context.Context, moduleDir, dir string) (jobd, walcmp string, err error) {
	bin := filepath.Join(dir, "bin")
	jobd, walcmp = filepath.Join(bin, "jobd"), filepath.Join(bin, "walcompare")
	for _, b := range [][2]string{{jobd, "./jobd"}, {walcmp, "github.com/jobraft/jobraft/walcompare/cmd/walcompare"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		cmd.Dir = moduleDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return jobd, walcmp, nil
}

// New prepares a cluster (token, certificates, addresses) without starting
// it.
func New(ctx context.Context, opts Options, jobd, walcmp string) (*Cluster, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	c := &Cluster{Opts: opts, Bin: jobd, WalCmp: walcmp}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	c.Token = hex.EncodeToString(tok[:])
	if err := os.WriteFile(filepath.Join(opts.Dir, "token"), []byte(c.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	var names, peers []string
	for i := 1; i <= opts.Members+opts.Spares; i++ {
		m := &Member{ID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(opts.Dir, fmt.Sprintf("n%d", i)),
			LogPath: filepath.Join(opts.Dir, fmt.Sprintf("n%d.log", i)), slot: i - 1}
		m.proc = &clustertest.Proc{Name: m.ID, Path: jobd, LogPath: m.LogPath, StopSignal: syscall.SIGTERM, SysProcAttr: sysProcAttr()}
		if err := m.place(opts.Placement); err != nil {
			return nil, err
		}
		m.Client = newMemberClient("http://"+m.HTTPAddr, c.Token)
		names = append(names, m.ID)
		if i > opts.Members {
			c.Spares = append(c.Spares, m)
			continue
		}
		c.Members = append(c.Members, m)
		peers = append(peers, m.ID+"="+m.Advertise)
	}
	c.peers = strings.Join(peers, ",")
	if opts.TLS {
		if err := c.genCerts(ctx, names); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// place sets m's addresses: from p, or free loopback ports.
func (m *Member) place(p Placement) error {
	var err error
	if p != nil {
		m.RaftAddr, m.Advertise, m.HTTPAddr, err = p.Addrs(m.slot)
		return err
	}
	if m.RaftAddr, err = freeAddr(); err != nil {
		return err
	}
	m.Advertise = m.RaftAddr
	m.HTTPAddr, err = freeAddr()
	return err
}

// genCerts issues the members' certificates: on loopback one run for all;
// placed, one per member for the host it advertises.
func (c *Cluster) genCerts(ctx context.Context, names []string) error {
	runs := [][]string{{"-names", strings.Join(names, ",")}}
	if c.Opts.Placement != nil {
		runs = nil
		for _, m := range append(append([]*Member(nil), c.Members...), c.Spares...) {
			host, _, err := net.SplitHostPort(m.Advertise)
			if err != nil {
				return err
			}
			runs = append(runs, []string{"-names", m.ID, "-hosts", host})
		}
	}
	for _, r := range runs {
		cmd := exec.CommandContext(ctx, c.Bin, append([]string{"gencerts", "-dir", c.CertDir()}, r...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("jobd gencerts: %v\n%s", err, out)
		}
	}
	return nil
}

// CertDir holds ca.pem and <id>.pem / <id>-key.pem.
func (c *Cluster) CertDir() string { return filepath.Join(c.Opts.Dir, "certs") }

func (c *Cluster) args(m *Member) []string {
	a := []string{"-id", m.ID, "-data", m.DataDir, "-raft-addr", m.RaftAddr, "-http-addr", m.HTTPAddr,
		"-token-file", filepath.Join(c.Opts.Dir, "token")}
	if m.Advertise != m.RaftAddr {
		a = append(a, "-advertise", m.Advertise)
	}
	if m.join != "" {
		a = append(a, "-join", "-cluster-id", m.join)
	} else {
		a = append(a, "-peers", c.peers, "-bootstrap")
	}
	if c.Opts.TLS {
		d := c.CertDir()
		a = append(a, "-cluster-ca", filepath.Join(d, "ca.pem"), "-cluster-cert", filepath.Join(d, m.ID+".pem"),
			"-cluster-key", filepath.Join(d, m.ID+"-key.pem"))
	}
	a = append(a, c.Opts.Flags...)
	if m.join != "" {
		// A spare runs no workers: the demo's checks count executions
		// per initial member.
		a = append(a, "-workers=false")
	}
	return a
}

// Start starts member i (again); its log is appended to.
func (c *Cluster) Start(i int) error { return c.start(c.Members[i]) }

func (c *Cluster) start(m *Member) error {
	m.proc.Args = c.args(m)
	if c.Opts.Placement != nil {
		cmd := c.Opts.Placement.Command(m.slot, c.Bin, c.args(m))
		m.proc.Path, m.proc.Args = cmd.Path, cmd.Args[1:]
	}
	return m.proc.Start()
}

// Running reports whether member i's process is alive.
func (c *Cluster) Running(i int) bool { return c.Members[i].proc.Running() }

// Freeze SIGSTOPs member i (Thaw resumes it; Kill and Close end it
// stopped too).
func (c *Cluster) Freeze(i int) error { return c.Members[i].proc.Pause() }

// Thaw SIGCONTs member i.
func (c *Cluster) Thaw(i int) error { return c.Members[i].proc.Resume() }

// Kill SIGKILLs member i and waits for the process to be gone.
func (c *Cluster) Kill(i int) error { return c.Members[i].proc.Kill() }

// Stop SIGTERMs member i and waits (up to timeout) for a clean exit; it
// returns an error if the process exited non-zero or had to be killed.
func (c *Cluster) Stop(i int, timeout time.Duration) error { return c.Members[i].proc.Stop(timeout) }

// Close SIGKILLs every member still running. It is safe to call more than
// once and from a signal handler's cleanup.
func (c *Cluster) Close() {
	for _, m := range append(append([]*Member(nil), c.Members...), c.Spares...) {
		_ = m.proc.Kill()
	}
}

// Index returns the index of the member with id, or -1.
func (c *Cluster) Index(id string) int {
	for i, m := range c.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// freeAddr is a loopback address below the ephemeral range, reserved for
// this process (clustertest.ReserveAddr): a spare started later, or a
// member restarted, binds it without racing other processes' outgoing
// connections for a kernel-assigned port (TestJoinChecksClusterID's spare
// once found its port taken: "address already in use").
func freeAddr() (string, error) { return clustertest.ReserveAddr() }
