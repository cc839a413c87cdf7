package raft

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
)

// A diverged member.
//
// The guard refuses every suffix truncation at or below the commit floor
// (wal G4). When the leader of a higher term asks a follower to cut its log
// from an index at or below that floor, the follower holds — and may have
// applied — an entry the cluster's leader does not have at an index it
// believes committed: it has diverged. Raft alone cannot reach that state
// (the leader's log holds every committed entry); disk damage, a data dir
// copied between members, or a bug can. The guard is right to refuse, and
// keeps refusing on every retry of the leader. The node makes it loud — a
// Status field, one EventDiverged, a gauge, a rate-limited log — and keeps
// the member out of the way until an operator re-seeds it: it does not
// stand for election and installs no snapshot (gates.go). docs/node.md,
// "A diverged member", has the reasoning and the recovery.

// Divergence describes how this member's log diverged from its leader's.
type Divergence struct {
	// Index is where the leader asked to cut this member's log: the first
	// index of the refused suffix truncation, at or below Floor; or, when
	// no cut could be asked for (the entries before it were compacted
	// here), the first index at or below Floor where the leader's append
	// carried an entry of another, higher term (divergentEntry).
	Index uint64 `json:"index"`
	// LocalTerm is the term of this member's own entry at Index.
	LocalTerm uint64 `json:"local_term"`
	// LeaderTerm is the term of the leader that asked, Leader its ID.
	LeaderTerm uint64 `json:"leader_term"`
	Leader     string `json:"leader"`
	// Floor is this member's commit floor when the truncation was refused.
	Floor uint64 `json:"floor"`
	// Since is when the divergence was detected.
	Since time.Time `json:"since"`
	// Refusals counts the refused truncations since then (the leader
	// retries with backoff, up to every ~10 s).
	Refusals uint64 `json:"refusals"`
}

// refusalView is what the member knew when its guard refused a truncation.
type refusalView struct {
	Follower   bool
	Self       string
	Leader     string // the leader's ID ("" when none is known)
	LeaderTerm uint64 // raft's current term: the term of the append that asked
	LocalTerm  uint64 // term of the member's own entry at the refused index (0: unknown)
}

// divergedBy decides whether a guard refusal means the member diverged: a
// suffix truncation (from above the first entry through the tail) refused
// because it reaches the commit floor, asked while the member follows a
// leader whose term is higher than that of its own entry at the cut.
func divergedBy(ge *wal.GuardError, v refusalView) (Divergence, bool) {
	if ge.Op != wal.OpDelete || ge.Err != wal.ErrCommittedTruncate {
		return Divergence{}, false
	}
	if ge.Min <= ge.First || ge.Max < ge.Last || ge.Min > ge.Floor {
		return Divergence{}, false // compaction, reset, or not at the floor
	}
	if !v.Follower || v.Leader == "" || v.Leader == v.Self || v.LocalTerm == 0 || v.LeaderTerm <= v.LocalTerm {
		return Divergence{}, false
	}
	return Divergence{Index: ge.Min, LocalTerm: v.LocalTerm, LeaderTerm: v.LeaderTerm, Leader: v.Leader, Floor: ge.Floor}, true
}

// divergedReport is how often the diverged gauge is emitted again (a
// metrics sink expires gauges it does not hear about), and the window of
// the repeated-log limiter.
const divergedReport = 10 * time.Second

// refusal is a guard refusal waiting to be classified, with the raft view
// taken when it happened.
type refusal struct {
	ge   *wal.GuardError
	view refusalView
}

// divergence is the member's divergence state. Once set it stays set until
// the member stops: a diverged member is re-seeded, not healed in place.
type divergence struct {
	raft    atomic.Pointer[hraft.Raft] // set once raft runs
	set     atomic.Bool
	pending chan refusal

	mu sync.Mutex
	d  *Divergence
}

func newDivergence() *divergence { return &divergence{pending: make(chan refusal, 16)} }

// is reports whether the member diverged (cheap: the gates ask on every
// vote request and snapshot).
func (d *divergence) is() bool { return d.set.Load() }

// current returns a copy of the divergence, or nil.
func (d *divergence) current() *Divergence {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d == nil {
		return nil
	}
	c := *d.d
	return &c
}

// record counts a divergent refusal; the first one sets the state and is
// returned with first = true.
func (d *divergence) record(div Divergence, now time.Time) (cur Divergence, first bool) {
	return d.note(div, now, true)
}

// note sets the state when it is not set yet (first = true) and, for a
// refusal, counts it; a divergence an append showed (divergentEntry) is
// no refusal.
func (d *divergence) note(div Divergence, now time.Time, refusal bool) (cur Divergence, first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d == nil {
		div.Since = now
		d.d = &div
		first = true
		d.set.Store(true)
	}
	if refusal {
		d.d.Refusals++
	}
	return *d.d, first
}

// offer queues a guard refusal for classification. It runs in the log's
// OnRefusal hook, on raft's goroutine: it only reads raft's atomics and
// never blocks (a refusal dropped on a full queue comes again with the
// leader's retry).
func (d *divergence) offer(err error, self string) {
	var ge *wal.GuardError
	if !errors.As(err, &ge) || ge.Op != wal.OpDelete || ge.Err != wal.ErrCommittedTruncate {
		return
	}
	r := d.raft.Load()
	if r == nil {
		return
	}
	_, leader := r.LeaderWithID()
	v := refusalView{Follower: r.State() == hraft.Follower, Self: self, Leader: string(leader), LeaderTerm: r.CurrentTerm()}
	select {
	case d.pending <- refusal{ge: ge, view: v}:
	default:
	}
}

// watchDivergence classifies queued refusals and keeps the gauge fresh,
// until Close.
func (n *Node) watchDivergence() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		gaugeDiverged(n.cfg.ID, false)
		tick := time.NewTicker(divergedReport)
		defer tick.Stop()
		for {
			select {
			case <-n.closed:
				return
			case <-tick.C:
				gaugeDiverged(n.cfg.ID, n.div.is())
			case rf := <-n.div.pending:
				n.classify(rf)
			}
		}
	}()
}

// classify reads the member's own term at the refused index (off raft's
// goroutine and outside the log's hook) and records a divergence.
func (n *Node) classify(rf refusal) {
	var e hraft.Log
	if n.log.GetLog(rf.ge.Min, &e) != nil {
		return
	}
	rf.view.LocalTerm = e.Term
	div, ok := divergedBy(rf.ge, rf.view)
	if !ok {
		return
	}
	n.diverge(div, rf.ge)
}

// divergentEntry finds what a refusal cannot show: an append from a
// leader (its term not below ours: raft handles it) carrying an entry
// inside this member's log, at or below its commit floor, whose term
// differs from the member's own entry there and is higher than it. The
// leader then holds another entry at an index this member committed: it
// has diverged, whether or not raft ever gets as far as asking to cut it.
// The seam asks only about an append raft will not truncate for (when it
// will, at or below the floor, the guard's refusal shows the divergence).
// Raft never asks when the entries before it were compacted here (a
// snapshot covers them): raft's lookup of the previous entry fails, the
// leader walks back one index at a time, and no truncation is ever asked
// for, so the guard never refuses one (a lying disk elsewhere in the
// cluster reaches this; docs/chaos.md, "A lying disk"). A compacted entry
// is compared too: the member's term there comes from its log's term index
// (wal.Log.TermAt, kept across compaction: termIndex); where the log cannot
// tell (no term index, or it does not know that far back) the entry is
// skipped. Without it the lying disk's shape of seed 16 looped for ever: a
// member that compacted past every index where the leader's log differs
// from its own walked the leader back to index 1 with "log not found" and
// reported nothing (TestCompactedDivergenceIsReported). Entries above the
// floor, or past the log, are raft's to reconcile.
func divergentEntry(log hraft.LogStore, floor uint64, a *hraft.AppendEntriesRequest) (Divergence, bool) {
	if len(a.Entries) == 0 || a.Entries[0] == nil || a.Entries[0].Index > floor {
		return Divergence{}, false
	}
	first, err := log.FirstIndex()
	if err != nil {
		return Divergence{}, false
	}
	last, err := log.LastIndex()
	if err != nil {
		return Divergence{}, false
	}
	for _, e := range a.Entries {
		if e == nil || e.Index > floor || e.Index > last {
			break
		}
		held, ok := heldTerm(log, first, e.Index)
		if !ok || held == e.Term {
			continue
		}
		if a.Term <= held {
			return Divergence{}, false
		}
		return Divergence{Index: e.Index, LocalTerm: held, LeaderTerm: a.Term, Leader: string(a.ID), Floor: floor}, true
	}
	return Divergence{}, false
}

// termIndex is a log that can tell its term at an index it compacted
// (wal.Log's term index).
type termIndex interface {
	TermAt(index uint64) (uint64, bool)
}

var _ termIndex = (*wal.Log)(nil)

// heldTerm is the term of log's entry at index (first: its first index):
// read from the entry when the log holds it, from the term index when it
// was compacted; false when the log cannot tell.
func heldTerm(log hraft.LogStore, first, index uint64) (uint64, bool) {
	if index < first {
		if ti, ok := log.(termIndex); ok {
			return ti.TermAt(index)
		}
		return 0, false
	}
	var stored hraft.Log
	if log.GetLog(index, &stored) != nil {
		return 0, false
	}
	return stored.Term, true
}

// diverge records a divergence; the first one is logged and published
// (err: what showed it, the guard's refusal or nil).
func (n *Node) diverge(div Divergence, err error) {
	cur, first := n.div.note(div, time.Now(), err != nil)
	if !first {
		return
	}
	gaugeDiverged(n.cfg.ID, true)
	n.cfg.Logger.Error("member diverged: the leader asks to cut entries at or below this member's commit floor; the guard refuses, "+
		"and this member stands for no election and installs no snapshot until it is re-seeded (docs/node.md, \"A diverged member\")",
		"index", cur.Index, "local_term", cur.LocalTerm, "leader", cur.Leader, "leader_term", cur.LeaderTerm, "floor", cur.Floor)
	n.events.publish(Event{Kind: EventDiverged, Time: cur.Since, Leader: cur.Leader, Term: cur.LeaderTerm, Index: cur.Index,
		Err: err, Divergence: &cur})
}
