package wal

import "sync/atomic"

// floorState is the commit floor: the highest index known committed, the
// maximum of a late-bound source (raft's commit and applied indexes) and what
// was persisted before.
type floorState struct {
	fn        atomic.Pointer[func() uint64]
	persisted atomic.Uint64
	// derived is what an unbound log learned from raft's own compactions
	// (see guard.deleteRange): raft compacts only below a snapshot it
	// persisted, so a compaction's end is committed.
	derived atomic.Uint64
	// reset is the late-bound reset bound (SetResetBound): the index up to
	// which a whole-log reset may remove committed entries. nil: resets are
	// not gated.
	reset atomic.Pointer[func() uint64]
}

func (f *floorState) set(fn func() uint64) {
	if fn == nil {
		f.fn.Store(nil)
		return
	}
	f.fn.Store(&fn)
}

// now returns the current floor.
func (f *floorState) now() uint64 {
	v := max(f.persisted.Load(), f.derived.Load())
	if p := f.fn.Load(); p != nil {
		v = max(v, (*p)())
	}
	return v
}

// bound reports whether a floor source is bound (SetCommitFloor).
func (f *floorState) bound() bool { return f.fn.Load() != nil }

// derive records v as known committed (unbound logs only).
func (f *floorState) derive(v uint64) {
	for {
		cur := f.derived.Load()
		if v <= cur || f.derived.CompareAndSwap(cur, v) {
			return
		}
	}
}

// raise records v as persisted if it is higher.
func (f *floorState) raise(v uint64) {
	for {
		cur := f.persisted.Load()
		if v <= cur || f.persisted.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (f *floorState) setReset(fn func() uint64) {
	if fn == nil {
		f.reset.Store(nil)
		return
	}
	f.reset.Store(&fn)
}

// resetGate returns the reset bound, if one is set.
func (f *floorState) resetGate() resetGate {
	if p := f.reset.Load(); p != nil {
		return resetGate{Gated: true, UpTo: (*p)()}
	}
	return resetGate{}
}
