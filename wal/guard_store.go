package wal

import (
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// storeAdapter is any raft.LogStore behind a Guard: it caches the store's
// shape for the guard's decisions and persists the commit floor in a
// raft.StableStore (GuardFloorStore) before the batch that raises it. The
// Guard's lock is held around every method but readEntry.
type storeAdapter struct {
	inner      raft.LogStore
	floorStore raft.StableStore
	floor      *segment.Floor

	loaded bool
	sh     shape // First, Last, LastTerm of inner
	err    error // set when the floor store could not be read
}

// writable reads the inner store's shape once (again after a failed write).
func (a *storeAdapter) writable() (shape, error) {
	if a.err != nil {
		return shape{}, a.err
	}
	if a.loaded {
		return a.sh, nil
	}
	first, err := a.inner.FirstIndex()
	if err != nil {
		return shape{}, err
	}
	last, err := a.inner.LastIndex()
	if err != nil {
		return shape{}, err
	}
	var lastTerm uint64
	if last != 0 {
		var e raft.Log
		if err := a.inner.GetLog(last, &e); err != nil {
			return shape{}, fmt.Errorf("wal: guard: read last entry %d: %w", last, err)
		}
		lastTerm = e.Term
	}
	a.sh = shape{First: first, Last: last, LastTerm: lastTerm}
	a.loaded = true
	return a.sh, nil
}

func (a *storeAdapter) readEntry(index uint64, out *raft.Log) (*segment.Where, error) {
	return nil, a.inner.GetLog(index, out)
}

func (a *storeAdapter) fits(shape, []*raft.Log) *GuardError { return nil }

func (a *storeAdapter) appendBatch(entries []*raft.Log, floor uint64) error {
	if a.floorStore != nil && floor > a.floor.Persisted() {
		if err := a.floorStore.SetUint64(floorKey, floor); err != nil {
			return fmt.Errorf("wal: guard: persist floor: %w", err)
		}
		a.floor.Raise(floor)
	}
	if err := a.inner.StoreLogs(entries); err != nil {
		a.loaded = false // the inner store may hold part of the batch
		return err
	}
	if a.sh.Last == 0 {
		a.sh.First = entries[0].Index
	}
	last := entries[len(entries)-1]
	a.sh.Last, a.sh.LastTerm = last.Index, last.Term
	return nil
}

func (a *storeAdapter) removeRange(kind deleteKind, min, max, prevTerm uint64, sh shape) error {
	// Pass the inner store exactly the part of the range that exists: some
	// stores mishandle bounds outside the log (raft.InmemStore with min 0).
	if err := a.inner.DeleteRange(maxU(min, sh.First), minU(max, sh.Last)); err != nil {
		a.loaded = false
		return err
	}
	switch kind {
	case deletePrefix:
		a.sh.First = max + 1
	case deleteSuffix:
		a.sh.Last, a.sh.LastTerm = min-1, prevTerm
	case deleteAll:
		a.sh = shape{}
	}
	return nil
}

func maxU(a, b uint64) uint64 { return max(a, b) }
func minU(a, b uint64) uint64 { return min(a, b) }
