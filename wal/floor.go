package wal

import "sync/atomic"

// floorState is the commit floor: the highest index known committed, the
// maximum of a late-bound source (raft's commit and applied indexes) and what
// was persisted before.
type floorState struct {
	fn        atomic.Pointer[func() uint64]
	persisted atomic.Uint64
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
	v := f.persisted.Load()
	if p := f.fn.Load(); p != nil {
		v = max(v, (*p)())
	}
	return v
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
