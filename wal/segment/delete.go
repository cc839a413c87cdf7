package segment

import (
	"fmt"
	"os"
	"time"
)

// removeQuiesced makes whatever deferred appends left durable, then
// applies one deletion the guard accepted (G4): compact, truncate or reset.
// Each is durable when it returns. wmu held.
func (l *Store) removeQuiesced(apply func() error) error {
	release, err := l.quiesce()
	if err != nil {
		return err
	}
	defer release()
	return apply()
}

// reset removes the whole log, as snapshot install does it: a reset
// segment records it, and every older segment goes. wmu held, quiesced.
func (l *Store) reset() error {
	// The stored term index goes first: a crash before the reset
	// segment leaves a log that knows less, never one that would
	// answer with the old history's terms (terms.go).
	if err := l.storeTerms(0, 0, nil); err != nil {
		return err
	}
	l.mu.Lock()
	l.terms = termIndex{}
	l.mu.Unlock()
	seg, err := l.createSegment(0, segFlagReset)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.first, l.last, l.lastTerm = 0, 0, 0
	l.setDurableLocked()
	l.cache.dropFrom(0)
	l.mu.Unlock()
	l.rotateTo(seg, true)
	return nil
}

// SetResetBound gates whole-log resets (G4): fn returns the index of the
// latest snapshot the caller made durable, and a reset that would remove
// committed entries (the log's first index at or below the commit floor) is
// refused with ErrCommittedTruncate unless that index reaches the floor.
// The node passes the index of the last snapshot its store sealed, which
// hashicorp/raft always seals before it resets the log. Without a bound
// (nil, the default) resets are not gated. fn must be cheap and must not
// call back into the log.
func (l *Store) SetResetBound(fn func() uint64) { l.floor.SetReset(fn) }

// compact drops entries through max (max < last). The new first index is
// made durable first (a first-index mark, see first.go), so FirstIndex never
// moves backwards across a restart; then whole segments below it are
// removed, oldest first. A partly compacted segment keeps its file, and its
// entries below the first index stay on disk but are never served again.
func (l *Store) compact(max uint64) error {
	if err := l.keepTermsThrough(max); err != nil {
		return err
	}
	if err := l.persistFirst(max + 1); err != nil {
		return err
	}
	l.mu.Lock()
	l.first = max + 1
	var drop []*segment
	for len(l.segs) > 1 {
		s := l.segs[0]
		if len(s.offs) > 0 && s.lastIndex() >= l.first {
			break
		}
		drop = append(drop, s)
		l.segs = l.segs[1:]
	}
	l.cache.dropThrough(max)
	l.mu.Unlock()
	l.keepSegments(l.removeSegments(drop))
	return nil
}

// truncate cuts the suffix from min (first < min <= last, min > floor);
// prevTerm is the term of entry min-1, the new last.
func (l *Store) truncate(min, prevTerm uint64) error {
	seg, err := l.createSegment(min, 0)
	if err != nil {
		return err
	}
	l.mu.Lock()
	var keep, drop []*segment
	for _, s := range l.segs {
		switch {
		case s.base >= min:
			// Holds only entries at or above min, or is an earlier
			// truncation marker above min: superseded by the new segment.
			drop = append(drop, s)
		case len(s.offs) > 0 && s.lastIndex() >= min:
			n := min - s.base
			s.offs, s.lens = s.offs[:n], s.lens[:n]
			keep = append(keep, s)
		default:
			keep = append(keep, s)
		}
	}
	// Remove the newest first: whatever a crash leaves is a prefix of the
	// segment sequence followed by the new segment, which replays to the
	// truncated log.
	for i, j := 0, len(drop)-1; i < j; i, j = i+1, j-1 {
		drop[i], drop[j] = drop[j], drop[i]
	}
	l.segs = append(keep, seg)
	l.last, l.lastTerm = min-1, prevTerm
	l.terms.cutFrom(min)
	l.setDurableLocked()
	l.cache.dropFrom(min)
	l.mu.Unlock()
	l.keepSegments(l.removeSegments(drop))
	return nil
}

// Close makes what deferred appends left durable, writes a floor mark if
// the floor advanced since the last batch, and closes every file. Further
// calls return ErrClosed. A log that failed (before Close, or when Close
// wrote what waited) still closes every file but returns ErrFailed: nothing
// beyond Durable and PersistedFloor was made durable.
func (l *Store) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	l.stopWriter()
	release, ferr := l.quiesce()
	if ferr == nil {
		defer release()
	}
	l.mu.Lock()
	l.closed = true
	failed := l.failed
	l.def.notifyLocked()
	l.mu.Unlock()
	var firstErr error
	if failed == nil {
		if err := l.persistFloor(); err != nil {
			firstErr = err
		}
	} else {
		firstErr = fmt.Errorf("wal: close: %w: %w", ErrFailed, failed)
	}
	l.closeFiles()
	if err := l.stable.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

// persistFloor appends a floor mark frame when the floor is above what was
// persisted. wmu held.
func (l *Store) persistFloor() error {
	floor := l.floor.Now()
	if floor <= l.floor.Persisted() {
		return nil
	}
	tail := l.segs[len(l.segs)-1]
	buf := make([]byte, frameHeaderSize)
	frameHeader{Kind: frameFloor, Floor: floor}.put(buf)
	if err := l.writeTail(tail, buf); err != nil {
		return fmt.Errorf("wal: write floor mark: %w", err)
	}
	start := time.Now()
	if err := tail.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync floor mark: %w", err)
	}
	measureFsync(start)
	l.floor.Raise(floor)
	return nil
}

// SyncFloor makes the current commit floor durable now (a floor mark), so a
// restart refuses truncations up to it even if no batch followed.
func (l *Store) SyncFloor() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if _, err := l.writable(); err != nil {
		return err
	}
	release, err := l.quiesce()
	if err != nil {
		return err
	}
	defer release()
	if err := l.persistFloor(); err != nil {
		return l.fail(FailWrite, err)
	}
	return nil
}

func (l *Store) closeFiles() {
	for _, s := range l.segs {
		if err := s.f.Close(); err != nil && !os.IsNotExist(err) {
			l.cfg.Logger.Warn("close segment", "segment", s.path, "error", err)
		}
	}
	l.segs = nil
}
