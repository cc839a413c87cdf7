package raft

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// Open starts a member. See Config for bootstrap and join. opts are test
// instrumentation (Option); a host passes none.
func Open(cfg Config, sm StateMachine, opts ...Option) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := wiring(opts)
	n := &Node{cfg: cfg, sm: sm, fsm: newAdapter(sm, w.Applied), events: newEventHub(), div: newDivergence(), closed: make(chan struct{}),
		pastGranted: map[string]time.Time{}}
	n.life, n.kill = context.WithCancel(context.Background())
	n.seam.stickyFor.Store(int64(cfg.HeartbeatTimeout))
	ok := false
	defer func() {
		if !ok {
			n.kill()
			n.closeParts()
		}
	}()
	// The wal's and raft's lines that repeat on every refused retry are
	// let through once per window (quietlog.go).
	quiet := limitRepeats(cfg.Logger, divergedReport)
	if err := n.openLog(quiet, w.WAL); err != nil {
		return nil, err
	}
	if err := n.openSnapshots(w.Snapshot); err != nil {
		return nil, err
	}
	trans, err := n.openTransport(w)
	if err != nil {
		return nil, err
	}
	if err := n.startRaft(quiet, trans, w.Applied); err != nil {
		return nil, err
	}
	n.mon = newMonitor(n) // the leader's catch-up monitor (catchup.go), before the handlers that read it
	n.serve()
	n.run()
	ok = true
	return n, nil
}

// openLog opens the guarded log, its refusals and failure reported as
// events (and a failed leader stepping down, durable.go).
func (n *Node) openLog(logger hclog.Logger, extra []wal.Option) error {
	cfg := n.cfg
	opts := append([]wal.Option{
		wal.RequireStamp(),
		wal.WithLogger(logger.Named("wal")),
		wal.OnRefusal(func(err error) {
			n.guardRefusals.Add(1)
			n.events.publish(Event{Kind: EventGuardRefusal, Err: err})
			n.div.offer(err, cfg.ID)
		}),
		wal.OnFailure(func(class string) {
			gaugeLogFailed(cfg.ID, true)
			n.events.publish(Event{Kind: EventLogFailed, Err: fmt.Errorf("%w (%s)", wal.ErrFailed, class)})
			n.stepDownOnFailedLog()
		}),
	}, extra...)
	var err error
	if n.log, err = wal.Open(filepath.Join(cfg.DataDir, "log"), opts...); err != nil {
		return fmt.Errorf("raft: open log: %w", err)
	}
	gaugeLogFailed(cfg.ID, false)
	return nil
}

// openSnapshots opens the sealed snapshot store.
func (n *Node) openSnapshots(extra []snapshot.Option) error {
	opts := append([]snapshot.Option{
		snapshot.WithRetain(n.cfg.SnapshotRetain),
		snapshot.WithLogger(n.cfg.Logger.Named("snapshot")),
		snapshot.WithEvents(n.snapshotEvent),
	}, extra...)
	var err error
	if n.snaps, err = snapshot.Open(filepath.Join(n.cfg.DataDir, "snapshots"), opts...); err != nil {
		return fmt.Errorf("raft: open snapshot store: %w", err)
	}
	return nil
}

// openTransport listens and builds raft's transport, innermost first:
// the network transport with its pipelines drained (seam.DrainPipelines,
// hashicorp/raft #612) and each request's target bound to the member raft
// sends it to (under TLS the dial verifies the server is that member);
// the options' wrapper (tests); the replication meter (meter.go); the
// campaign gate (gates.go: no vote requests while the member is diverged,
// its log failed or raft's last index is stale); and, outermost, the
// reconcile seam (package raft/seam), which every incoming RPC passes
// before raft sees it. It also sets the member's RPC caller.
func (n *Node) openTransport(w Wiring) (hraft.Transport, error) {
	cfg := n.cfg
	var err error
	if n.mux, err = transport.Listen(transport.Config{
		ID: cfg.ID, BindAddr: cfg.BindAddr, AdvertiseAddr: cfg.AdvertiseAddr, TLS: cfg.TLS,
		AllowInsecure: cfg.AllowInsecure, Logger: cfg.Logger.Named("transport"),
		MaxFrameSize: cfg.MaxCommandSize + 64<<10,
	}); err != nil {
		return nil, err
	}
	if n.nt, err = n.mux.RaftTransport(transport.RaftOptions{Timeout: 10 * time.Second}); err != nil {
		return nil, err
	}
	var trans hraft.Transport = n.mux.BindTargets(seam.DrainPipelines(n.nt))
	var caller transport.Caller = n.mux
	if w.Transport != nil {
		trans = w.Transport(n.mux.Addr(), trans)
	}
	if w.Caller != nil {
		caller = w.Caller(n.mux.Addr(), caller)
	}
	// A call to a member's address expects that member (identity.go).
	n.caller = memberCaller{n: n, inner: caller}
	trans, n.meter = newMeter(trans)
	trans = gateCampaigns(trans, n.noCampaign)
	return seam.Wrap(trans, n.seamHooks()), nil
}

// raftConfig is hashicorp/raft's configuration for this member.
func (n *Node) raftConfig(logger hclog.Logger) (*hraft.Config, error) {
	cfg := n.cfg
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	if cfg.SnapshotLogRatio >= 0 {
		rc.SnapshotThreshold = neverThreshold // the member decides (cadence.go)
	}
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	// A removed leader steps down to an idle follower instead of shutting
	// raft down from inside: that internal shutdown is never waited for, so
	// Close would close the log under raft's still-running goroutines and
	// leave the raft transport open (its accept loop outliving Close).
	rc.ShutdownOnRemove = false
	rc.Logger = raftLogger(logger.Named("raft"), cfg.Logger) // quiet below Warn unless the host debugs (quietlog.go)
	if err := hraft.ValidateConfig(rc); err != nil {
		return nil, invalidConfig("%v", err)
	}
	return rc, nil
}

// startRaft checks and repairs the data dir, starts hashicorp/raft over
// the parts, binds the log's commit floor and reset bound to it, and
// bootstraps a new cluster when asked.
func (n *Node) startRaft(logger hclog.Logger, trans hraft.Transport, applied AppliedObserver) error {
	cfg := n.cfg
	rc, err := n.raftConfig(logger)
	if err != nil {
		return err
	}
	hasState, err := hraft.HasExistingState(n.log, n.log, n.snaps)
	if err != nil {
		return err
	}
	// A member without state that does not bootstrap waits to be added:
	// it checks the cluster ID of the first leader that sends it entries.
	n.join.checked.Store(cfg.ClusterID == "" || hasState || cfg.Bootstrap)
	rs, err := findRestorable(n.snaps)
	if err != nil {
		return err
	}
	if err := checkRestorable(n.log, rs); err != nil {
		return err
	}
	if snap, last, err := resetLogBelowSnapshot(n.log, rs); err != nil {
		return fmt.Errorf("raft: reset a log that ends below the latest snapshot: %w", err)
	} else if snap != 0 {
		cfg.Logger.Warn("the log ended below the latest snapshot (a power loss during an install, or writes the disk acknowledged were lost); reset it: the member continues from the snapshot",
			"log_last_index", last, "snapshot_index", snap)
	}
	if rs.newest != nil {
		n.noteSnapshot(rs.newest.Index, rs.newest.Size) // what NewRaft restores
	}
	if applied != nil {
		applied.Started() // before NewRaft, which restores the latest snapshot
	}
	snaps := snapshotGate{Store: n.snaps, diverged: n.div.is, refused: func(index, term uint64, err error) {
		n.events.publish(Event{Kind: EventSnapshotRejected, Index: index, Term: term, Err: err})
	}}
	n.fsm.gate = n.awaitDurable
	if n.r, err = hraft.NewRaft(rc, n.fsm, raftLog{Log: n.log, inRaft: &n.seam.inRaft}, n.log, snaps, trans); err != nil {
		return fmt.Errorf("raft: start: %w", err)
	}
	r := n.r
	n.raft.Store(r)
	n.anchorTerms(r)
	n.div.raft.Store(r)
	n.log.SetCommitFloor(func() uint64 { return max(n.durableCommit(r), n.fsm.applied.Load()) })
	// hashicorp/raft seals a snapshot (taken or installed) before it resets
	// the log; a reset of committed entries needs one reaching the floor
	// (docs/upstream.md U2).
	n.log.SetResetBound(n.seam.sealed.Load)
	if cfg.Bootstrap && !hasState {
		return n.bootstrap()
	}
	return nil
}

// bootstrap starts a new cluster on Config.InitialMembers (this member
// alone when none).
func (n *Node) bootstrap() error {
	members := n.cfg.InitialMembers
	if len(members) == 0 {
		members = []Member{{ID: n.cfg.ID, Address: n.mux.Addr(), Voter: true}}
	}
	var conf hraft.Configuration
	for _, m := range members {
		s := hraft.Voter
		if !m.Voter {
			s = hraft.Nonvoter
		}
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: s, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)})
	}
	if err := n.r.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	return nil
}

// serve registers the member's RPC handlers on its listener: its own
// (ownHandlers), then the host's log services (Config.LogServices).
func (n *Node) serve() {
	for method, h := range ownHandlers {
		n.mux.Handle(method, func(ctx context.Context, req []byte) ([]byte, error) { return h(n, ctx, req) })
	}
	for method, svc := range n.cfg.LogServices {
		n.mux.Handle(method, func(ctx context.Context, req []byte) ([]byte, error) {
			return svc(ctx, n.log, n.log.PersistedFloor, req)
		})
	}
}

// ownHandlers are the RPC methods a member serves itself; a log service
// cannot take one (Config.LogServices).
var ownHandlers = map[string]func(*Node, context.Context, []byte) ([]byte, error){
	methodPropose:      (*Node).handlePropose,
	methodReadIndex:    (*Node).handleReadIndex,
	methodTerm:         (*Node).handleTerm,
	methodStatus:       (*Node).handleStatus,
	methodAdd:          (*Node).handleAdd,
	methodRemove:       (*Node).handleRemove,
	methodSnapshotPast: (*Node).handleSnapshotPast,
	methodTermStarts:   (*Node).handleTermStarts,
	methodProgress:     (*Node).handleProgress,
}

// run starts the member's goroutines, all ended by Close: the observer of
// raft's events, the leader's catch-up monitor, the stale last index
// repair, the watches for a divergence and for its removal, and the
// snapshot cadence.
func (n *Node) run() {
	n.observe()
	n.mon.run()
	n.watchStaleLastIndex()
	n.watchDivergence()
	n.watchRemoval()
	n.runCadence()
}
