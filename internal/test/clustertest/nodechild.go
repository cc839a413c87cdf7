package clustertest

// A node child (NodeProcs) is the test binary itself, re-executed with the
// environment variable EnvNode holding a JSON ChildConfig. The test
// binary's TestMain calls Main (RunIfChild) first; in a child it opens the
// member (raft.Open over a KV, recording its applied history to
// HistoryPath) and a small control RPC server on ChildConfig.CtlAddr, then
// blocks until its stdin closes (the parent stopping it gracefully or
// dying). In the parent, RunIfChild returns at once.
//
// The parent talks to a child only through APIs: the control RPC (propose,
// status, linearizable read, dump of the KV) over transport, never by
// reading its logs. Child logs go to a file in the test's temp dir, for a
// human reading a failure.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// EnvNode names the environment variable that makes the test binary a
// node member process (NodeProcs).
const EnvNode = "JOBRAFT_CLUSTERTEST_NODE"

// ChildConfig is the subset of raft.Config a child member is started with,
// plus the harness's own settings.
type ChildConfig struct {
	ID                 string        `json:"id"`
	DataDir            string        `json:"data_dir"`
	BindAddr           string        `json:"bind_addr"`
	CtlAddr            string        `json:"ctl_addr"` // control RPC listener
	LogFile            string        `json:"log_file"`
	Bootstrap          bool          `json:"bootstrap"`
	InitialMembers     []raft.Member `json:"initial_members"`
	HeartbeatTimeout   time.Duration `json:"heartbeat_timeout"`
	ElectionTimeout    time.Duration `json:"election_timeout"`
	LeaderLeaseTimeout time.Duration `json:"leader_lease_timeout"`
	CommitTimeout      time.Duration `json:"commit_timeout"`
	ApplyTimeout       time.Duration `json:"apply_timeout"`
	TrailingLogs       uint64        `json:"trailing_logs"`
	SnapshotThreshold  uint64        `json:"snapshot_threshold"`
	SnapshotInterval   time.Duration `json:"snapshot_interval"`
	// WALSegmentSize, when set, is the member's wal.WithSegmentSize (small
	// segments let compaction remove whole segments in tests).
	WALSegmentSize int64 `json:"wal_segment_size,omitempty"`
}

// raftConfig is the member's raft.Config.
func (c ChildConfig) raftConfig(logger hclog.Logger) raft.Config {
	return raft.Config{
		ID: c.ID, DataDir: c.DataDir, BindAddr: c.BindAddr,
		Bootstrap: c.Bootstrap, InitialMembers: c.InitialMembers,
		HeartbeatTimeout: c.HeartbeatTimeout, ElectionTimeout: c.ElectionTimeout,
		LeaderLeaseTimeout: c.LeaderLeaseTimeout, CommitTimeout: c.CommitTimeout,
		ApplyTimeout: c.ApplyTimeout, TrailingLogs: c.TrailingLogs,
		SnapshotThreshold: c.SnapshotThreshold, SnapshotInterval: c.SnapshotInterval,
		Logger: logger, LogServices: Digests(),
	}
}

// walOptions are the member's extra wal.Open options.
func (c ChildConfig) walOptions() []nodeopt.Option {
	if c.WALSegmentSize <= 0 {
		return nil
	}
	return []nodeopt.Option{nodeopt.WALOptions(wal.WithSegmentSize(c.WALSegmentSize))}
}

// Control RPC methods served by a child on CtlAddr.
const (
	methodPropose = "ctl.propose" // req: command; reply: proposeReply
	methodStatus  = "ctl.status"  // reply: raft.Status
	methodRead    = "ctl.read"    // req: key; reply: readReply (after LinearizableRead)
	methodDump    = "ctl.dump"    // reply: map[string]Entry
)

// Outcome classes in a proposeReply.
const (
	classOK            = "ok"
	classRejected      = "rejected"
	classIndeterminate = "indeterminate"
)

type proposeReply struct {
	Index uint64 `json:"index"`
	Class string `json:"class"`
	Err   string `json:"err,omitempty"`
}

type readReply struct {
	Index uint64 `json:"index"`
	Value string `json:"value"`
	Found bool   `json:"found"`
}

// runNodeChild runs the node member and exits when the process is one
// (EnvNode is set); otherwise it returns at once.
func runNodeChild() {
	spec := os.Getenv(EnvNode)
	if spec == "" {
		return
	}
	if err := runChild(spec); err != nil {
		fmt.Fprintf(os.Stderr, "clustertest node child: %v\n", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func runChild(spec string) error {
	var cc ChildConfig
	if err := json.Unmarshal([]byte(spec), &cc); err != nil {
		return fmt.Errorf("bad %s: %w", EnvNode, err)
	}
	out := io.Writer(os.Stderr)
	if cc.LogFile != "" {
		f, err := os.OpenFile(cc.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f // unbuffered: one write per line
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: cc.ID, Level: hclog.Info, Output: out})
	applied, err := history.OpenFile(cc.ID, HistoryPath(cc.DataDir), exitOnHistoryError)
	if err != nil {
		return fmt.Errorf("applied history of %s: %w", cc.ID, err)
	}
	kv := NewKV()
	node, err := raft.Open(cc.raftConfig(logger), kv, append(cc.walOptions(), nodeopt.Applied(applied))...)
	if err != nil {
		return fmt.Errorf("open %s: %w", cc.ID, err)
	}
	ctl, err := transport.Listen(transport.Config{BindAddr: cc.CtlAddr, Logger: logger.Named("ctl")})
	if err != nil {
		node.Close()
		return fmt.Errorf("control listener: %w", err)
	}
	serveControl(ctl, node, kv)
	// Block until the parent closes our stdin (graceful stop) or dies.
	io.Copy(io.Discard, os.Stdin)
	ctl.Close()
	return node.Close()
}

// exitOnHistoryError ends a member process whose applied history cannot be
// written: the harness names the death (CheckAlive), where a member running
// on with a hole in its history would be checked wrongly.
func exitOnHistoryError(err error) {
	fmt.Fprintf(os.Stderr, "clustertest node child: %v\n", err)
	os.Exit(4)
}

func serveControl(ctl *transport.Mux, node *raft.Node, kv *KV) {
	ctl.Handle(methodPropose, func(ctx context.Context, req []byte) ([]byte, error) {
		res, err := node.Propose(ctx, req)
		rep := proposeReply{Index: res.Index, Class: classOK}
		switch {
		case err == nil:
		case errors.Is(err, raft.ErrRejected):
			rep.Class, rep.Err = classRejected, err.Error()
		case errors.Is(err, raft.ErrIndeterminate):
			rep.Class, rep.Err = classIndeterminate, err.Error()
		default:
			rep.Class, rep.Err = "unclassified", err.Error()
		}
		return json.Marshal(rep)
	})
	ctl.Handle(methodStatus, func(context.Context, []byte) ([]byte, error) {
		return json.Marshal(node.Status())
	})
	ctl.Handle(methodRead, func(ctx context.Context, req []byte) ([]byte, error) {
		idx, err := node.LinearizableRead(ctx)
		if err != nil {
			return nil, err
		}
		v, ok := kv.Get(string(req))
		return json.Marshal(readReply{Index: idx, Value: v, Found: ok})
	})
	ctl.Handle(methodDump, func(context.Context, []byte) ([]byte, error) {
		return json.Marshal(kv.Dump())
	})
}
