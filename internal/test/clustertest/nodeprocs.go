package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/walcompare"
)

// NodeProcs starts, kills and restarts raft node members as child
// processes (Proc) and talks to them through their control RPC. Every
// member records its applied history to a file in its data dir
// (HistoryPath); the convergence wait of its Group checks it while it
// polls and fails the test at once on a violation (CheckApplied).
type NodeProcs struct {
	*Group
	t       testing.TB
	client  *transport.Mux // only dials
	Members []*NodeProc
}

// NodeProc is one child node member process.
type NodeProc struct {
	*Proc
	h   *NodeProcs
	Cfg ChildConfig
}

// Errors of the control RPC, besides the proposal classes of package raft.
var (
	// ErrUnclassified: a proposal error matched neither raft.ErrRejected nor
	// raft.ErrIndeterminate (a contract violation the tests report).
	ErrUnclassified = errors.New("clustertest: proposal error of no class")
)

// FastChild returns a child config with the test timeouts of
// FastConfig (heartbeat and election 150ms).
func FastChild(t testing.TB, id, dir string) ChildConfig {
	fc := FastConfig(t, id, dir, "")
	return ChildConfig{
		ID: id, DataDir: dir,
		BindAddr: FreeAddr(t), CtlAddr: FreeAddr(t),
		LogFile:          dir + ".log",
		HeartbeatTimeout: fc.HeartbeatTimeout, ElectionTimeout: fc.ElectionTimeout,
		LeaderLeaseTimeout: fc.LeaderLeaseTimeout, CommitTimeout: fc.CommitTimeout,
		ApplyTimeout: fc.ApplyTimeout, TrailingLogs: fc.TrailingLogs,
		SnapshotThreshold: fc.SnapshotThreshold, SnapshotInterval: fc.SnapshotInterval,
	}
}

// NewNodeProcs returns a harness; everything it starts is killed at
// cleanup.
func NewNodeProcs(t testing.TB) *NodeProcs {
	t.Helper()
	client, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &NodeProcs{t: t, client: client}
	h.Group = NewGroup(t, h.members, Policy{AppliedEvery: appliedCheckEvery})
	t.Cleanup(func() {
		for _, m := range h.Members {
			m.Kill()
		}
		client.Close()
	})
	return h
}

// appliedCheckEvery throttles the applied-history check of a child-process
// cluster's convergence wait: each one reads the members' history files
// and the leader's new log entries over RPC.
const appliedCheckEvery = 250 * time.Millisecond

// StartCluster bootstraps an n-member cluster of child processes (m0..).
func (h *NodeProcs) StartCluster(n int, tweak func(*ChildConfig)) []*NodeProc {
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
	var out []*NodeProc
	for _, cc := range cfgs {
		cc.InitialMembers = members
		out = append(out, h.Start(cc))
	}
	return out
}

// Start starts a member process and waits until its control RPC answers.
func (h *NodeProcs) Start(cc ChildConfig) *NodeProc {
	h.t.Helper()
	m := &NodeProc{h: h, Cfg: cc, Proc: &Proc{Name: cc.ID, Path: os.Args[0], Args: []string{"-test.run=^$"}}}
	h.Members = append(h.Members, m)
	m.Restart()
	return m
}

// Restart starts the member's process again from its data dir, with its
// Cfg as it is now (the member must not be running), and waits until its
// control RPC answers.
func (m *NodeProc) Restart() {
	t := m.h.t
	t.Helper()
	spec, err := json.Marshal(m.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.LogPath, m.Env = m.Cfg.LogFile, []string{EnvNode + "=" + string(spec), "GORACE=halt_on_error=1 exitcode=66"}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	exited := m.Exited()
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

// Stop stops the member gracefully (Proc.Stop: its stdin closes, it
// closes its node and exits; SIGKILLed after 30 s) and fails the test on
// an exit that was not clean (a race report: exit code 66).
func (m *NodeProc) Stop() {
	if err := m.Proc.Stop(30 * time.Second); err != nil {
		m.h.t.Error(err)
	}
}

func (m *NodeProc) call(ctx context.Context, method string, req []byte, out any) error {
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
func (m *NodeProc) Status(ctx context.Context) (raft.Status, error) {
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
func (m *NodeProc) Propose(ctx context.Context, cmd []byte) (uint64, error) {
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
func (m *NodeProc) Read(ctx context.Context, key string) (value string, found bool, index uint64, err error) {
	var rep readReply
	if err := m.call(ctx, methodRead, []byte(key), &rep); err != nil {
		return "", false, 0, err
	}
	return rep.Value, rep.Found, rep.Index, nil
}

// Dump returns every key of the member's KV with its value and write count.
func (m *NodeProc) Dump(ctx context.Context) (map[string]Entry, error) {
	var out map[string]Entry
	err := m.call(ctx, methodDump, nil, &out)
	return out, err
}

// LeaderProc waits for a running member that reports itself leader in a
// term above minTerm (Group.LeaderAbove), and returns it with its status.
func (h *NodeProcs) LeaderProc(d time.Duration, minTerm uint64) (*NodeProc, raft.Status) {
	h.t.Helper()
	l, st := h.LeaderAbove(d, minTerm)
	return h.Members[l], st
}

// CheckAlive fails the test for any member that died without being asked.
func (h *NodeProcs) CheckAlive() {
	h.t.Helper()
	for _, m := range h.Members {
		if died, err := m.Died(); died {
			h.t.Errorf("%s died unexpectedly (%v); its log: %s", m.Cfg.ID, err, m.Cfg.LogFile)
		}
	}
}

// members are the harness's members as its Group sees them.
func (h *NodeProcs) members() []Member {
	out := make([]Member, len(h.Members))
	for i, m := range h.Members {
		out[i] = nodeProcMember{m}
	}
	return out
}

// nodeProcMember is a NodeProc as a Group sees it.
type nodeProcMember struct{ m *NodeProc }

var _ Member = nodeProcMember{}

func (p nodeProcMember) ID() string { return p.m.Cfg.ID }
func (p nodeProcMember) Up() bool   { return p.m.Up() }

func (p nodeProcMember) Status(ctx context.Context) (raft.Status, error) { return p.m.Status(ctx) }

func (p nodeProcMember) LinearizableRead(ctx context.Context) error {
	_, _, _, err := p.m.Read(ctx, "")
	return err
}

func (p nodeProcMember) Log(ctx context.Context) (walcompare.Member, error) {
	return walcompare.Dial(ctx, p.m.Cfg.ID, p.m.Cfg.BindAddr, nil)
}

func (p nodeProcMember) Applied() history.Source {
	return history.FileSource(p.m.Cfg.ID, HistoryPath(p.m.Cfg.DataDir))
}
