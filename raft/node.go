package raft

import (
	"context"
	"errors"
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
	raft      atomic.Pointer[hraft.Raft] // r, for the seam's hooks (set once NewRaft returns)

	seam      seamState // the reconcile seam's counts and carried state (seam.go)
	closed    chan struct{}
	life      context.Context // canceled when Close begins
	kill      context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup

	guardRefusals atomic.Uint64 // the guard's refusals (each also an EventGuardRefusal)

	lastSnap      atomic.Pointer[snapInfo] // the latest snapshot sealed or restored at start (cadence.go)
	cadenceChecks atomic.Uint64            // the snapshot cadence's checks (cadence.go)

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

func (n *Node) snapshotEvent(e snapshot.Event) {
	switch e.Kind {
	case snapshot.Sealed:
		ev := Event{Kind: EventSnapshotSealed}
		if e.Manifest != nil {
			ev.Index, ev.Term = e.Manifest.Index, e.Manifest.Term
			n.seam.sealed.Store(e.Manifest.Index) // the wal's reset bound
			n.noteSnapshot(e.Manifest.Index, e.Manifest.Size)
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
