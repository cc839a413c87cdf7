package segment

import (
	"fmt"
	"time"
)

// Where the first index is durable: compaction writes a first-index mark
// to the tail, and every segment created while the log holds entries (a
// rotation, a suffix truncation) starts with a mark of the first index at
// that moment, written and synced with its header. A truncation removes the
// segments above its cut, possibly the one holding the latest mark; its
// own segment carries the mark on, and until that segment is durable the
// removed ones are still there.

// firstMarkFrame returns a first-index mark frame.
func firstMarkFrame(first, floor uint64) []byte {
	buf := make([]byte, frameHeaderSize+firstMarkSize)
	frameHeader{Kind: frameFirst, Floor: floor, BodyLen: firstMarkSize}.put(buf)
	putFirstMark(buf[frameHeaderSize:], first)
	return buf
}

// persistFirst makes first the log's durable first index: a first-index
// mark frame (format version 2) at the tail, synced. A tail written by an
// older format version is never given a newer frame: the log first rotates
// to a new segment that continues it (base last+1). An error fails the log
// like any write error. wmu held; the log is not empty.
func (l *Store) persistFirst(first uint64) error {
	tail := l.segs[len(l.segs)-1]
	if tail.version < firstMarkVersion {
		l.mu.RLock()
		next := l.last + 1
		l.mu.RUnlock()
		seg, err := l.createSegment(next, 0)
		if err != nil {
			return err
		}
		l.rotateTo(seg, false)
		tail = seg
	}
	floor := l.floor.Now()
	buf := firstMarkFrame(first, floor)
	if err := l.writeTail(tail, buf); err != nil {
		return l.fail(FailWrite, fmt.Errorf("wal: write first-index mark %d: %w", first, err))
	}
	start := time.Now()
	if err := tail.f.Sync(); err != nil {
		return l.fail(FailSync, fmt.Errorf("wal: sync first-index mark %d: %w", first, err))
	}
	measureFsync(start)
	l.floor.Raise(floor)
	return nil
}
