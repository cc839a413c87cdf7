package raft

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// Node is one member: hashicorp/raft over the guarded log (wal), the sealed
// snapshot store, and one multiplexed listener, replicating an
// StateMachine. It is safe for concurrent use.
type Node struct {
	cfg    Config
	sm     StateMachine
	fsm    *adapter
	log    *wal.Log
	snaps  *snapshot.Store
	mux    *transport.Mux
	nt     *hraft.NetworkTransport
	caller transport.Caller
	r      *hraft.Raft
	events *eventHub
	div    *divergence
	// leaders ends forwarded proposals when another leader is learnt
	// (leaderwatch.go).
	leaders leaderWatch

	readyTerm atomic.Uint64 // term whose first barrier this leader committed
	readyMu   sync.Mutex
	readyFl   *readyFlight               // the term's first barrier in flight or done (read.go)
	inRaft    atomic.Int64               // RPCs the seam handed raft's main loop, not yet answered (durable.go)
	raft      atomic.Pointer[hraft.Raft] // r, for the seam's hooks (set once NewRaft returns)

	clamps        atomic.Uint64 // appends whose commit index the seam clamped (U1)
	rerouted      atomic.Uint64 // heartbeats sent through raft's main loop (U6)
	strayTimeouts atomic.Uint64 // TimeoutNow requests refused at the seam (U5)
	unstuck       atomic.Uint64 // (pre-)votes let past a silent leader's stickiness (U13)
	stickyFor     atomic.Int64  // how long after the last contact raft's leader stickiness holds (U13: the heartbeat timeout)
	inst          installSeam   // installs and a stale last index at the seam (U2, U3)
	closed        chan struct{}
	life          context.Context // canceled when Close begins
	kill          context.CancelFunc
	closeOnce     sync.Once
	closeErr      error
	wg            sync.WaitGroup

	appendsRefused atomic.Uint64 // appends refused whole at the seam (U4; nil entries)
	guardRefusals  atomic.Uint64 // the guard's refusals (each also an EventGuardRefusal)

	meter       *meter   // what the leader's transport sent each member (meter.go)
	mon         *monitor // the leader's catch-up monitor (catchup.go)
	pastMu      sync.Mutex
	pastGranted map[string]time.Time // snapshot-past requests granted, per member (stale.go)
	reach       reachCache           // the last round of status calls of an operation that reached no leader (leaderwait.go)
	join        joinGate             // a member without state checks its leader's cluster ID (clusterid.go)
	removal     removalState         // whether this member was removed from the cluster (removed.go)
}

// RPC methods served on the member's listener.
const (
	methodPropose   = "jr.propose"
	methodReadIndex = "jr.readindex"
	methodTerm      = "jr.term"
	methodStatus    = "jr.status"
	methodAdd       = "jr.member.add"
	methodRemove    = "jr.member.remove"
)

// Open starts a member. See Config for bootstrap and join. opts are test
// instrumentation (Option); a host passes none.
func Open(cfg Config, sm StateMachine, opts ...Option) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := wiring(opts)
	n := &Node{cfg: cfg, sm: sm, fsm: newAdapter(sm, o.Applied), events: newEventHub(), div: newDivergence(), closed: make(chan struct{}),
		pastGranted: map[string]time.Time{}}
	n.life, n.kill = context.WithCancel(context.Background())
	n.stickyFor.Store(int64(cfg.HeartbeatTimeout))
	ok := false
	defer func() {
		if !ok {
			n.kill()
			n.closeParts()
		}
	}()
	logger := cfg.Logger
	// The wal's and raft's lines that repeat on every refused retry are
	// let through once per window (quietlog.go).
	quiet := limitRepeats(logger, divergedReport)
	walOpts := append([]wal.Option{
		wal.RequireStamp(),
		wal.WithLogger(quiet.Named("wal")),
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
	}, o.WAL...)
	if n.log, err = wal.Open(filepath.Join(cfg.DataDir, "log"), walOpts...); err != nil {
		return nil, fmt.Errorf("raft: open log: %w", err)
	}
	gaugeLogFailed(cfg.ID, false)
	snapOpts := append([]snapshot.Option{
		snapshot.WithRetain(cfg.SnapshotRetain),
		snapshot.WithLogger(logger.Named("snapshot")),
		snapshot.WithEvents(n.snapshotEvent),
	}, o.Snapshot...)
	if n.snaps, err = snapshot.Open(filepath.Join(cfg.DataDir, "snapshots"), snapOpts...); err != nil {
		return nil, fmt.Errorf("raft: open snapshot store: %w", err)
	}
	if n.mux, err = transport.Listen(transport.Config{
		ID: cfg.ID, BindAddr: cfg.BindAddr, AdvertiseAddr: cfg.AdvertiseAddr, TLS: cfg.TLS,
		AllowInsecure: cfg.AllowInsecure, Logger: logger.Named("transport"),
		MaxFrameSize: cfg.MaxCommandSize + 64<<10,
	}); err != nil {
		return nil, err
	}
	nt, err := n.mux.RaftTransport(transport.RaftOptions{Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	n.nt = nt
	// Pipelines drained so a refused append cannot wedge replication
	// (hashicorp/raft #612); pre-vote and Close stay the transport's own.
	// Each request binds its target address to the member raft sends it
	// to, so that under TLS the dial verifies the server is that member.
	var trans hraft.Transport = n.mux.BindTargets(transport.DrainPipelines(nt))
	var caller transport.Caller = n.mux
	if o.Transport != nil {
		trans = o.Transport(n.mux.Addr(), trans)
	}
	if o.Caller != nil {
		caller = o.Caller(n.mux.Addr(), caller)
	}
	// A call to a member's address expects that member (identity.go).
	n.caller = memberCaller{n: n, inner: caller}
	// The replication meter counts what raft sends each member (meter.go).
	trans, n.meter = newMeter(trans)
	// No vote requests while the member is diverged (gates.go) or while
	// raft's cached last index is stale (stale.go, docs/upstream.md U3).
	trans = gateCampaigns(trans, n.noCampaign)
	// The reconcile seam, outermost: every incoming RPC passes it before
	// raft sees it (whatever the layers below deliver, duplicates
	// included); it clamps each append's commit index to the last entry it
	// verified and applies the member's policy (docs/upstream.md). While
	// raft's cached last index is stale, appends at it and unsafe votes are
	// refused (stale.go, U3).
	hooks := n.seamHooks()
	hooks.Intercept = n.staleIntercept(hooks.Intercept)
	// The leader writes its log while it replicates (durable.go).
	hooks.InRaft = n.inRaftHook
	hooks.Answered = n.answeredHook // adopts an installed snapshot's term index (seam_terms.go)
	hooks.CommitBound = func() uint64 {
		if r := n.raftNow(); r != nil {
			return n.durableCommit(r)
		}
		return n.log.Durable()
	}
	trans = transport.Seam(trans, hooks)

	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	// A removed leader steps down to an idle follower instead of shutting
	// raft down from inside: that internal shutdown is never waited for, so
	// Close would close the log under raft's still-running goroutines and
	// leave the raft transport open (its accept loop outliving Close).
	rc.ShutdownOnRemove = false
	rc.Logger = raftLogger(quiet.Named("raft"), logger) // quiet below Warn unless the host debugs (quietlog.go)
	if err := hraft.ValidateConfig(rc); err != nil {
		return nil, invalidConfig("%v", err)
	}
	hasState, err := hraft.HasExistingState(n.log, n.log, n.snaps)
	if err != nil {
		return nil, err
	}
	// A member without state that does not bootstrap waits to be added:
	// it checks the cluster ID of the first leader that sends it entries.
	n.join.checked.Store(cfg.ClusterID == "" || hasState || cfg.Bootstrap)
	if err := checkRestorable(n.log, n.snaps); err != nil {
		return nil, err
	}
	if snap, last, err := resetLogBelowSnapshot(n.log, n.snaps); err != nil {
		return nil, fmt.Errorf("raft: reset a log that ends below the latest snapshot: %w", err)
	} else if snap != 0 {
		cfg.Logger.Warn("the log ended below the latest snapshot (a power loss during an install, or writes the disk acknowledged were lost); reset it: the member continues from the snapshot",
			"log_last_index", last, "snapshot_index", snap)
	}
	if o.Applied != nil {
		// Before NewRaft, which restores the latest snapshot.
		o.Applied.Started()
	}
	snaps := snapshotGate{Store: n.snaps, diverged: n.div.is, refused: func(index, term uint64, err error) {
		n.events.publish(Event{Kind: EventSnapshotRejected, Index: index, Term: term, Err: err})
	}}
	n.fsm.gate = n.awaitDurable
	if n.r, err = hraft.NewRaft(rc, n.fsm, raftLog{Log: n.log, inRaft: &n.inRaft}, n.log, snaps, trans); err != nil {
		return nil, fmt.Errorf("raft: start: %w", err)
	}
	r := n.r
	n.raft.Store(r)
	n.anchorTerms(r)
	n.div.raft.Store(r)
	n.log.SetCommitFloor(func() uint64 { return max(n.durableCommit(r), n.fsm.applied.Load()) })
	// hashicorp/raft seals a snapshot (taken or installed) before it resets
	// the log; a reset of committed entries needs one reaching the floor
	// (docs/upstream.md U2).
	n.log.SetResetBound(n.inst.sealed.Load)
	if cfg.Bootstrap && !hasState {
		members := cfg.InitialMembers
		if len(members) == 0 {
			members = []Member{{ID: cfg.ID, Address: n.mux.Addr(), Voter: true}}
		}
		var conf hraft.Configuration
		for _, m := range members {
			s := hraft.Voter
			if !m.Voter {
				s = hraft.Nonvoter
			}
			conf.Servers = append(conf.Servers, hraft.Server{Suffrage: s, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)})
		}
		if err := r.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	n.mon = newMonitor(n)
	n.mux.Handle(methodPropose, n.handlePropose)
	n.mux.Handle(methodReadIndex, n.handleReadIndex)
	n.mux.Handle(methodTerm, n.handleTerm)
	n.mux.Handle(methodStatus, n.handleStatus)
	n.mux.Handle(methodAdd, n.handleAdd)
	n.mux.Handle(methodRemove, n.handleRemove)
	n.mux.Handle(methodRangeDigest, n.handleRangeDigest)
	n.mux.Handle(methodSnapshotPast, n.handleSnapshotPast)
	n.mux.Handle(methodTermStarts, n.handleTermStarts)
	n.mux.Handle(methodProgress, n.handleProgress)
	n.observe()
	n.mon.run()
	n.watchStaleLastIndex()
	n.watchDivergence()
	n.watchRemoval()
	ok = true
	return n, nil
}

func (n *Node) snapshotEvent(e snapshot.Event) {
	switch e.Kind {
	case snapshot.Sealed:
		ev := Event{Kind: EventSnapshotSealed}
		if e.Manifest != nil {
			ev.Index, ev.Term = e.Manifest.Index, e.Manifest.Term
			n.inst.sealed.Store(e.Manifest.Index) // the wal's reset bound
		}
		n.events.publish(ev)
	case snapshot.Rejected, snapshot.Refused:
		n.events.publish(Event{Kind: EventSnapshotRejected, Err: e.Err})
	}
}

// ID returns the member's ID.
func (n *Node) ID() string { return n.cfg.ID }

// Addr returns the address peers and clients dial.
func (n *Node) Addr() string { return n.mux.Addr() }

// Events subscribes to this member's events. buf bounds the subscriber's
// queue: when it is full, events are dropped for it (the node never
// blocks). cancel ends the subscription and closes the channel.
func (n *Node) Events(buf int) (events <-chan Event, cancel func()) { return n.events.subscribe(buf) }

// Raft exposes the underlying hashicorp/raft instance for advanced use
// (metrics, stats). Proposals must go through Propose, which stamps them.
func (n *Node) Raft() *hraft.Raft { return n.r }

// Log exposes the member's log (for walcompare and diagnostics).
func (n *Node) Log() *wal.Log { return n.log }

// Close stops the member: raft, the listener, the log. It is what a
// graceful shutdown does; a crash is the process dying.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.closed)
		n.kill()
		n.closeErr = n.closeParts()
		n.wg.Wait()
	})
	return n.closeErr
}

// quiesceTimeout bounds how long Close waits for inbound raft requests
// in flight to be answered before it shuts raft down.
const quiesceTimeout = 2 * time.Second

func (n *Node) closeParts() error {
	var errs []error
	if n.r != nil {
		// Inbound raft requests end (answered) before raft stops: see
		// transport.Mux.QuiesceRaft.
		ctx, cancel := context.WithTimeout(context.Background(), quiesceTimeout)
		n.mux.QuiesceRaft(ctx)
		cancel()
		errs = append(errs, n.r.Shutdown().Error()) // closes the raft transport too
	} else if n.nt != nil {
		errs = append(errs, n.nt.Close()) // Open failed before raft owned it
	}
	if n.mux != nil {
		errs = append(errs, n.mux.Close())
	}
	if n.log != nil {
		if err := n.log.Close(); err != nil && !errors.Is(err, wal.ErrClosed) {
			errs = append(errs, err)
		}
	}
	n.events.close()
	return errors.Join(errs...)
}

// closedCtx returns a context canceled when Close begins.
func (n *Node) closedCtx() context.Context { return n.life }

func (n *Node) isClosed() bool {
	select {
	case <-n.closed:
		return true
	default:
		return false
	}
}
