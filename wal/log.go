package wal

import (
	"io"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// Log is a segment-file raft.LogStore with the persist guard built in, and a
// bbolt raft.StableStore in the same directory: the segment store
// (wal/segment) behind the one guard (guard.go). It is safe for concurrent
// use: writes are serialised, reads run concurrently with them.
//
// Log's own methods are the guarded ones: GetLog, StoreLog, StoreLogs,
// StoreLogsDeferred, DeleteRange and CheckReplace. The rest are the
// embedded *segment.Store's, documented there: the bounds (FirstIndex,
// LastIndex, IsMonotonic), the stable store (Get, Set, GetUint64,
// SetUint64), Close, the commit floor (SetCommitFloor, SetResetBound,
// Floor, PersistedFloor, SyncFloor), durability and failure (Durable,
// DurableChanged, Syncs, Failure, Repaired) and the term index (TermAt,
// TermStarts, AdoptTerms, ForgetTerms, TermsThrough). None of them writes
// an entry: every entry written or read passes the guard.
type Log struct {
	*segment.Store
	w    *segment.Writer
	g    guard
	opts options
}

var (
	_ raft.LogStore          = (*Log)(nil)
	_ raft.MonotonicLogStore = (*Log)(nil)
	_ raft.StableStore       = (*Log)(nil)
	_ io.Closer              = (*Log)(nil)
)

// Open opens (or creates) the log in dir. It replays every segment and
// verifies every record: a torn tail (the unacknowledged last batch) is cut,
// while damage before it makes Open fail with ErrCorrupt and a diagnostic
// (segment, offset, index), unless Repair is given.
func Open(dir string, opts ...Option) (*Log, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	l := &Log{opts: o}
	w, err := segment.Open(dir, segment.Config{
		FS: o.fs, SegmentSize: o.segmentSize, Prealloc: o.prealloc, CacheSize: o.cacheSize,
		Logger: o.logger, Repair: o.repair, OnRefusal: l.refused, OnFailure: o.onFailure,
	})
	if err != nil {
		return nil, err
	}
	l.Store, l.w = w.Store(), w
	l.g = guard{
		store: segStore{w}, floor: w.Floor(), wmu: w,
		requireStamp: o.requireStamp, logger: o.logger, report: l.refused,
	}
	return l, nil
}

// refused counts a refusal and reports it to the OnRefusal hook.
func (l *Log) refused(err error) {
	countRefusal(err)
	if fn := l.opts.onRefusal; fn != nil {
		fn(err)
	}
}

// GetLog implements raft.LogStore. Every read is verified: the record
// against its checksum and the body against its stamp. Damage is refused
// with an error matching ErrCorrupt (and ErrPayloadMismatch for a body that
// does not match its stamp); the damaged bytes are never returned.
func (l *Log) GetLog(index uint64, out *raft.Log) error { return l.g.getLog(index, out) }

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore. The batch is checked as a whole by the
// guard (G1–G3, G5) and refused without any change, or written with one
// write and made durable with one fsync before it returns (G7). Entries that
// arrive without a stamp get one (origin segment.StampPersist); the
// caller's entries are never modified.
//
// The caller must not change a stored entry's Data or Extensions afterwards
// (hashicorp/raft never does; its own LogCache asks the same): the log's
// cache of recent entries shares them. Data changed anyway is not read
// back: the entry no longer matches its stamp, and GetLog refuses it
// (ErrPayloadMismatch) while it is cached; the disk holds what was stored
// (TestChangedDataAfterStoreIsRefusedNotRead).
func (l *Log) StoreLogs(entries []*raft.Log) error { return l.g.storeLogs(entries, false) }

// StoreLogsDeferred is StoreLogs without the wait for the disk: the batch
// is checked by the guard exactly as StoreLogs checks it (a refusal changes
// nothing) and is part of the log when it returns — LastIndex, GetLog and
// every later call see it — but it is durable only once Durable reaches
// its last index: the log's writer writes every batch waiting with one
// write and syncs them with one fsync, while the caller goes on. A batch
// that must start a new segment is stored synchronously. Any other write
// (StoreLogs, DeleteRange, Close) first makes everything waiting durable.
// A write or sync error of the writer fails the log (ErrFailed) as
// StoreLogs's would. What was waiting when the process died is lost with
// it; nothing said it was durable. Stored entries are the log's to share,
// as with StoreLogs.
func (l *Log) StoreLogsDeferred(entries []*raft.Log) error { return l.g.storeLogs(entries, true) }

// DeleteRange implements raft.LogStore under the guard's G4 (see
// checkDelete): prefix compaction up to the floor, suffix truncation above
// it, or a whole-log reset as snapshot install does it. A refusal changes
// nothing. Each is durable when it returns: a truncation or reset is
// recorded by a new segment whose header says where the log continues, a
// compaction by a first-index mark.
func (l *Log) DeleteRange(min, max uint64) error { return l.g.deleteRange(min, max) }

// segStore is the segment store's Writer behind Log's guard.
type segStore struct{ w *segment.Writer }

func (s segStore) writable() (shape, error) { return s.w.Writable() }

func (s segStore) readEntry(index uint64, out *raft.Log) (*segment.Where, error) {
	return s.w.ReadEntry(index, out)
}

func (s segStore) fits(sh shape, entries []*raft.Log) *GuardError {
	return segment.CheckFits(sh, entries)
}

func (s segStore) appendBatch(entries []*raft.Log, floor uint64) error {
	return s.w.Append(entries, floor)
}

func (s segStore) appendDeferred(entries []*raft.Log, floor uint64) error {
	return s.w.AppendDeferred(entries, floor)
}

func (s segStore) removeRange(kind deleteKind, min, max, prevTerm uint64, _ shape) error {
	switch kind {
	case deletePrefix:
		return s.w.Compact(max)
	case deleteSuffix:
		return s.w.Truncate(min, prevTerm)
	case deleteAll:
		return s.w.Reset()
	}
	return nil
}
