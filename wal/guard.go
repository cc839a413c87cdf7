package wal

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// This file is the persist guard, written once: the guard type decides
// every write and verifies every read (its decisions are the pure functions
// of decide.go) in front of a store that only does. Log is the segment
// store (wal/segment) behind it (segStore); Guard is the same guard in
// front of any raft.LogStore (storeAdapter).

// guarded is what the guard needs of the store behind it.
type guarded interface {
	// writable returns the store's shape when it takes writes, or why it
	// does not (ErrClosed, ErrFailed, a read error). The guard sets Floor.
	writable() (shape, error)
	// readEntry reads the entry at index as stored: checked against the
	// store's own record checks, not yet against its stamp. where, when
	// not nil, locates the record for the diagnostic of a stamp refusal.
	readEntry(index uint64, out *raft.Log) (where *segment.Where, err error)
	// fits refuses what the store's format cannot hold (nil: it fits).
	fits(sh shape, entries []*raft.Log) *GuardError
	// appendBatch makes entries (accepted and stamped) durable. The store is
	// the guard's floor persister: floor, the commit floor the batch was
	// accepted under, is durable when appendBatch returns nil (the segment
	// store writes it into the batch's frame; the adapter of a Guard stores
	// it in its floor store first), so after a restart truncations at or
	// below it are refused before raft has learned anything.
	appendBatch(entries []*raft.Log, floor uint64) error
	// removeRange applies a deletion the guard accepted as kind (never
	// deleteNone); prevTerm is the term of entry min-1 for a suffix.
	removeRange(kind deleteKind, min, max, prevTerm uint64, sh shape) error
}

// annotate puts where a stored record is into a refusal's diagnostic.
func annotate(g *GuardError, r *segment.Where) {
	g.First, g.Last, g.LastTerm, g.Floor = r.Shape.First, r.Shape.Last, r.Shape.LastTerm, r.Shape.Floor
	g.Segment, g.Offset = r.Segment, r.Offset
}

// guard enforces G1–G6 on every StoreLogs, DeleteRange and GetLog of its
// store; durability (G7) is the store's.
type guard struct {
	store guarded
	floor *segment.Floor
	wmu   sync.Locker // the store's write lock: serialises writes
	// requireStamp refuses unstamped commands; allowUnstamped returns
	// stored entries without a stamp (a Guard over an older log).
	requireStamp, allowUnstamped bool
	logger                       hclog.Logger
	// report counts a refusal and passes it to the owner's hook.
	report func(error)
	// logReads logs refused reads too (a Guard does; the node's Log
	// reports them through its hook instead).
	logReads bool
}

// refuse reports and logs a refused write.
func (g *guard) refuse(op string, ge *GuardError) error {
	g.report(ge)
	g.logger.Error("guard refused "+op, "error", ge)
	return ge
}

// storeLogs checks the batch as a whole (G1–G3, G5) and refuses it
// unchanged, or has the store append it with a persist stamp added to the
// entries that arrived without one (on copies); deferred, without waiting
// for the disk when the store can (Log.StoreLogsDeferred).
func (g *guard) storeLogs(entries []*raft.Log, deferred bool) error {
	if len(entries) == 0 {
		return nil
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	sh, err := g.store.writable()
	if err != nil {
		return err
	}
	sh.Floor = g.floor.Now()
	if ge := checkStore(sh, entries, g.requireStamp); ge != nil {
		if ge.Err == ErrOverwrite {
			var stored raft.Log
			if _, err := g.store.readEntry(ge.Index, &stored); err == nil {
				overwriteDiag(ge, &stored, entries[0])
			}
		}
		return g.refuse("StoreLogs", ge)
	}
	if ge := g.store.fits(sh, entries); ge != nil {
		return g.refuse("StoreLogs", ge)
	}
	if d, ok := g.store.(interface {
		appendDeferred([]*raft.Log, uint64) error
	}); ok && deferred {
		return d.appendDeferred(segment.StampMissing(entries), sh.Floor)
	}
	return g.store.appendBatch(segment.StampMissing(entries), sh.Floor)
}

// deleteRange decides a deletion under G4 (see checkDelete) and has the
// store apply it. A refusal changes nothing.
func (g *guard) deleteRange(min, max uint64) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	sh, err := g.store.writable()
	if err != nil {
		return err
	}
	sh.Floor = g.floor.Now()
	if !g.floor.Bound() && sh.Last != 0 && min <= sh.First && max >= sh.First && max < sh.Last && max > sh.Floor {
		// No floor source bound (a plain hashicorp/raft user): trust
		// raft's compaction contract. hashicorp/raft deletes a prefix
		// only up to the index of a snapshot it has persisted
		// (compactLogs: max <= the snapshot's index), so the compaction
		// itself says its entries are committed. The floor rises to it
		// (made durable with the compaction), so later truncations at or
		// below it are refused. A bound source is checked, not trusted.
		g.floor.Derive(max)
		sh.Floor = g.floor.Now()
	}
	var gate resetGate
	gate.UpTo, gate.Gated = g.floor.ResetBound()
	kind, ge := checkDeleteGated(sh, min, max, gate)
	if ge != nil {
		return g.refuse("DeleteRange", ge)
	}
	if kind == deleteNone {
		return nil
	}
	var prevTerm uint64
	if kind == deleteSuffix {
		// The new last entry's term, read before anything changes (the
		// record's own checks cover the term).
		var prev raft.Log
		if _, err := g.store.readEntry(min-1, &prev); err != nil {
			return fmt.Errorf("wal: truncate at %d: read index %d: %w", min, min-1, err)
		}
		prevTerm = prev.Term
	}
	if err := g.store.removeRange(kind, min, max, prevTerm, sh); err != nil {
		return err
	}
	countDelete(kind)
	g.logger.Info("log range deleted", "kind", kind.String(), "min", min, "max", max, "floor", sh.Floor)
	return nil
}

// getLog reads the entry at index and verifies it against its stamp.
// Damage is refused with an error matching ErrCorrupt (ErrPayloadMismatch
// for a body that does not match its stamp); the damaged entry is not
// returned. A stamp the store added (StampPersist) is removed from what is
// returned: the caller gets exactly what StoreLog was given.
func (g *guard) getLog(index uint64, out *raft.Log) error {
	where, err := g.store.readEntry(index, out)
	if err != nil {
		return err
	}
	err = segment.VerifyStamp(out)
	if err == nil {
		segment.StripPersistStamp(out)
		return nil
	}
	var ge *GuardError
	isGE := errors.As(err, &ge)
	if isGE {
		ge.Op = OpGet // a refusal of this read
	}
	if isGE && ge.Err == ErrUnstamped && g.allowUnstamped {
		return nil
	}
	*out = raft.Log{}
	if isGE && where != nil {
		annotate(ge, where)
	}
	g.report(err)
	if g.logReads {
		g.logger.Error("guard refused GetLog", "error", err)
	}
	return err
}

// Guard is the persist guard as middleware over any raft.LogStore
// (raft-boltdb/v2, raft.InmemStore, ...): the guard of Log in front of
// another store. It enforces G1–G6 on every StoreLogs, DeleteRange and
// GetLog; durability (G7) is the inner store's.
//
// The guard keeps no copy of entries: every GetLog verifies the bytes the
// inner store returns. It assumes it is the inner store's only writer.
type Guard struct {
	g     guard
	a     *storeAdapter
	floor segment.Floor
	mu    sync.Mutex // serialises writes and the adapter's cached shape
}

var (
	_ raft.LogStore          = (*Guard)(nil)
	_ raft.MonotonicLogStore = (*Guard)(nil)
)

// GuardOption configures NewGuard.
type GuardOption func(*guardOptions)

type guardOptions struct {
	requireStamp   bool
	allowUnstamped bool
	floorStore     raft.StableStore
	logger         hclog.Logger
}

// GuardRequireStamp refuses command entries without a proposal stamp.
func GuardRequireStamp() GuardOption { return func(o *guardOptions) { o.requireStamp = true } }

// GuardAllowUnstamped lets GetLog return stored entries that carry no stamp
// (logs written before the guard was put in front of the store). Without it
// such an entry is refused as ErrUnstamped (which matches ErrCorrupt),
// because a stamp destroyed by rot looks the same.
func GuardAllowUnstamped() GuardOption { return func(o *guardOptions) { o.allowUnstamped = true } }

// GuardFloorStore persists the commit floor in s (key "jobraft_guard_floor")
// before each batch that raises it, so after a restart truncations at or
// below it are refused before raft has learned anything.
func GuardFloorStore(s raft.StableStore) GuardOption {
	return func(o *guardOptions) { o.floorStore = s }
}

// GuardLogger sets the logger (default: discard).
func GuardLogger(l hclog.Logger) GuardOption { return func(o *guardOptions) { o.logger = l } }

var floorKey = []byte("jobraft_guard_floor")

// NewGuard wraps inner with the persist guard.
func NewGuard(inner raft.LogStore, opts ...GuardOption) *Guard {
	o := guardOptions{logger: hclog.NewNullLogger()}
	for _, opt := range opts {
		opt(&o)
	}
	gd := &Guard{}
	gd.a = &storeAdapter{inner: inner, floorStore: o.floorStore, floor: &gd.floor}
	if fs := o.floorStore; fs != nil {
		v, err := fs.GetUint64(floorKey)
		switch {
		case err == nil:
			gd.floor.Raise(v)
		case isKeyNotFound(err):
		default:
			gd.a.err = fmt.Errorf("wal: read persisted floor: %w", err)
		}
	}
	gd.g = guard{
		store: gd.a, floor: &gd.floor, wmu: &gd.mu,
		requireStamp: o.requireStamp, allowUnstamped: o.allowUnstamped,
		logger: o.logger, report: countRefusal, logReads: true,
	}
	return gd
}

// isKeyNotFound reports whether err is a raft.StableStore's "key not found":
// ErrKeyNotFound, or another store's error with the same text (raft-boltdb's
// and raft.InmemStore's have no shared sentinel; hashicorp/raft itself
// recognises them by that text).
func isKeyNotFound(err error) bool {
	return errors.Is(err, ErrKeyNotFound) || (err != nil && err.Error() == ErrKeyNotFound.Error())
}

// Inner returns the wrapped store.
func (g *Guard) Inner() raft.LogStore { return g.a.inner }

// SetCommitFloor binds the commit floor source (see Log.SetCommitFloor).
func (g *Guard) SetCommitFloor(fn func() uint64) { g.floor.Set(fn) }

// SetResetBound gates whole-log resets (see Log.SetResetBound).
func (g *Guard) SetResetBound(fn func() uint64) { g.floor.SetReset(fn) }

// Floor returns the current commit floor.
func (g *Guard) Floor() uint64 { return g.floor.Now() }

// IsMonotonic implements raft.MonotonicLogStore. The guard refuses gaps, so
// raft must reset the log after a snapshot install instead of leaving one.
func (g *Guard) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (g *Guard) FirstIndex() (uint64, error) { return g.a.inner.FirstIndex() }

// LastIndex implements raft.LogStore.
func (g *Guard) LastIndex() (uint64, error) { return g.a.inner.LastIndex() }

// StoreLog implements raft.LogStore.
func (g *Guard) StoreLog(e *raft.Log) error { return g.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the batch is checked as a whole and
// refused unchanged, or passed to the inner store with a persist stamp
// added to entries that arrived without one (on copies).
func (g *Guard) StoreLogs(entries []*raft.Log) error { return g.g.storeLogs(entries, false) }

// DeleteRange implements raft.LogStore under G4 (see checkDelete).
func (g *Guard) DeleteRange(min, max uint64) error { return g.g.deleteRange(min, max) }

// GetLog implements raft.LogStore, verifying the entry the inner store
// returns against its stamp. Damage is refused with an error matching
// ErrCorrupt; the damaged entry is not returned.
func (g *Guard) GetLog(index uint64, out *raft.Log) error { return g.g.getLog(index, out) }
