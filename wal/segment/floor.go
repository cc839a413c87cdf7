package segment

import "sync/atomic"

// Floor is the commit floor: the highest index known committed, the
// maximum of a late-bound source (raft's commit and applied indexes) and what
// was persisted before. A Store keeps one; the persist guard (package wal)
// decides against it, and its Guard over another store keeps its own. The
// zero Floor is ready to use (no source bound, nothing persisted). It is
// safe for concurrent use.
type Floor struct {
	fn        atomic.Pointer[func() uint64]
	persisted atomic.Uint64
	// derived is what an unbound log learned from raft's own compactions
	// (see the guard's deleteRange in package wal): raft compacts only below a snapshot it
	// persisted, so a compaction's end is committed.
	derived atomic.Uint64
	// reset is the late-bound reset bound (SetResetBound): the index up to
	// which a whole-log reset may remove committed entries. nil: resets are
	// not gated.
	reset atomic.Pointer[func() uint64]
}

// Set binds the floor's source (nil unbinds it).
func (f *Floor) Set(fn func() uint64) {
	if fn == nil {
		f.fn.Store(nil)
		return
	}
	f.fn.Store(&fn)
}

// Now returns the current floor.
func (f *Floor) Now() uint64 {
	v := max(f.persisted.Load(), f.derived.Load())
	if p := f.fn.Load(); p != nil {
		v = max(v, (*p)())
	}
	return v
}

// Bound reports whether a floor source is bound (SetCommitFloor).
func (f *Floor) Bound() bool { return f.fn.Load() != nil }

// Derive records v as known committed (unbound logs only).
func (f *Floor) Derive(v uint64) {
	for {
		cur := f.derived.Load()
		if v <= cur || f.derived.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Raise records v as persisted if it is higher.
func (f *Floor) Raise(v uint64) {
	for {
		cur := f.persisted.Load()
		if v <= cur || f.persisted.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Persisted returns the highest floor recorded as persisted (Raise).
func (f *Floor) Persisted() uint64 { return f.persisted.Load() }

// SetReset binds the reset bound (SetResetBound; nil unbinds it).
func (f *Floor) SetReset(fn func() uint64) {
	if fn == nil {
		f.reset.Store(nil)
		return
	}
	f.reset.Store(&fn)
}

// ResetBound returns the reset bound, and whether one is set: resets are
// then gated, and upTo is the index of the snapshot that allows one (0:
// none).
func (f *Floor) ResetBound() (upTo uint64, gated bool) {
	if p := f.reset.Load(); p != nil {
		return (*p)(), true
	}
	return 0, false
}
