package wal

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Guard is the persist guard as middleware over any raft.LogStore
// (raft-boltdb/v2, raft.InmemStore, ...). It enforces G1–G6 on every
// StoreLogs, DeleteRange and GetLog; durability (G7) is the inner store's.
//
// The guard keeps no copy of entries: every GetLog verifies the bytes the
// inner store returns. It assumes it is the inner store's only writer.
type Guard struct {
	inner raft.LogStore
	opts  guardOptions
	floor floorState

	mu     sync.Mutex // serialises writes and the cached shape
	loaded bool
	sh     shape // First, Last, LastTerm of inner
	err    error // set when the floor store could not be read
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
	g := &Guard{inner: inner, opts: guardOptions{logger: hclog.NewNullLogger()}}
	for _, o := range opts {
		o(&g.opts)
	}
	if fs := g.opts.floorStore; fs != nil {
		v, err := fs.GetUint64(floorKey)
		switch {
		case err == nil:
			g.floor.raise(v)
		case err.Error() == "not found":
		default:
			g.err = fmt.Errorf("wal: read persisted floor: %w", err)
		}
	}
	return g
}

// Inner returns the wrapped store.
func (g *Guard) Inner() raft.LogStore { return g.inner }

// SetCommitFloor binds the commit floor source (see Log.SetCommitFloor).
func (g *Guard) SetCommitFloor(fn func() uint64) { g.floor.set(fn) }

// SetResetBound gates whole-log resets (see Log.SetResetBound).
func (g *Guard) SetResetBound(fn func() uint64) { g.floor.setReset(fn) }

// Floor returns the current commit floor.
func (g *Guard) Floor() uint64 { return g.floor.now() }

// IsMonotonic implements raft.MonotonicLogStore. The guard refuses gaps, so
// raft must reset the log after a snapshot install instead of leaving one.
func (g *Guard) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (g *Guard) FirstIndex() (uint64, error) { return g.inner.FirstIndex() }

// LastIndex implements raft.LogStore.
func (g *Guard) LastIndex() (uint64, error) { return g.inner.LastIndex() }

// load reads the inner store's shape. mu held.
func (g *Guard) load() error {
	if g.err != nil {
		return g.err
	}
	if g.loaded {
		return nil
	}
	first, err := g.inner.FirstIndex()
	if err != nil {
		return err
	}
	last, err := g.inner.LastIndex()
	if err != nil {
		return err
	}
	var lastTerm uint64
	if last != 0 {
		var e raft.Log
		if err := g.inner.GetLog(last, &e); err != nil {
			return fmt.Errorf("wal: guard: read last entry %d: %w", last, err)
		}
		lastTerm = e.Term
	}
	g.sh = shape{First: first, Last: last, LastTerm: lastTerm}
	g.loaded = true
	return nil
}

func (g *Guard) shape() shape {
	s := g.sh
	s.Floor = g.floor.now()
	return s
}

// StoreLog implements raft.LogStore.
func (g *Guard) StoreLog(e *raft.Log) error { return g.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the batch is checked as a whole and
// refused unchanged, or passed to the inner store with a persist stamp
// added to entries that arrived without one (on copies).
func (g *Guard) StoreLogs(entries []*raft.Log) error {
	if len(entries) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(); err != nil {
		return err
	}
	sh := g.shape()
	if ge := checkStore(sh, entries, g.opts.requireStamp); ge != nil {
		if ge.Err == ErrOverwrite {
			var stored raft.Log
			if g.inner.GetLog(ge.Index, &stored) == nil {
				overwriteDiag(ge, &stored, entries[0])
			}
		}
		countRefusal(ge)
		g.opts.logger.Error("guard refused StoreLogs", "error", ge)
		return ge
	}
	if fs := g.opts.floorStore; fs != nil && sh.Floor > g.floor.persisted.Load() {
		if err := fs.SetUint64(floorKey, sh.Floor); err != nil {
			return fmt.Errorf("wal: guard: persist floor: %w", err)
		}
		g.floor.raise(sh.Floor)
	}
	if err := g.inner.StoreLogs(stampMissing(entries)); err != nil {
		g.loaded = false // the inner store may hold part of the batch
		return err
	}
	if g.sh.Last == 0 {
		g.sh.First = entries[0].Index
	}
	last := entries[len(entries)-1]
	g.sh.Last, g.sh.LastTerm = last.Index, last.Term
	return nil
}

// DeleteRange implements raft.LogStore under G4 (see checkDelete).
func (g *Guard) DeleteRange(min, max uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(); err != nil {
		return err
	}
	sh := g.shape()
	kind, ge := checkDeleteGated(sh, min, max, g.floor.resetGate())
	if ge != nil {
		countRefusal(ge)
		g.opts.logger.Error("guard refused DeleteRange", "error", ge)
		return ge
	}
	if kind == deleteNone {
		return nil
	}
	var prevTerm uint64
	if kind == deleteSuffix {
		var prev raft.Log
		if err := g.inner.GetLog(min-1, &prev); err != nil {
			return fmt.Errorf("wal: guard: truncate at %d: read index %d: %w", min, min-1, err)
		}
		prevTerm = prev.Term
	}
	// Pass the inner store exactly the part of the range that exists: some
	// stores mishandle bounds outside the log (raft.InmemStore with min 0).
	if err := g.inner.DeleteRange(maxU(min, sh.First), minU(max, sh.Last)); err != nil {
		g.loaded = false
		return err
	}
	switch kind {
	case deletePrefix:
		g.sh.First = max + 1
	case deleteSuffix:
		g.sh.Last, g.sh.LastTerm = min-1, prevTerm
	case deleteAll:
		g.sh = shape{}
	}
	countDelete(kind)
	return nil
}

// GetLog implements raft.LogStore, verifying the entry the inner store
// returns against its stamp. Damage is refused with an error matching
// ErrCorrupt; the damaged entry is not returned.
func (g *Guard) GetLog(index uint64, out *raft.Log) error {
	if err := g.inner.GetLog(index, out); err != nil {
		return err
	}
	err := verifyStamp(OpGet, out)
	if err == nil {
		return nil
	}
	var ge *GuardError
	if errors.As(err, &ge) && ge.Err == ErrUnstamped && g.opts.allowUnstamped {
		return nil
	}
	*out = raft.Log{}
	countRefusal(err)
	g.opts.logger.Error("guard refused GetLog", "error", err)
	return err
}

func maxU(a, b uint64) uint64 { return max(a, b) }
func minU(a, b uint64) uint64 { return min(a, b) }
