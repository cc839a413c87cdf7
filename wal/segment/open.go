package segment

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/vfs"
)

// Config configures Open. wal.Open fills it from its options (and its
// defaults: wal.WithSegmentSize and the others).
type Config struct {
	// FS is the file system all IO goes through (nil: vfs.OSFS).
	FS vfs.FS
	// SegmentSize is the size after which a new segment file starts
	// (clamped to [header+1, 1 GiB]).
	SegmentSize int64
	// Prealloc is how many zero bytes are written ahead of the tail.
	Prealloc int64
	// CacheSize is how many recently stored entries are kept in memory.
	CacheSize int
	// Logger receives the store's warnings (nil: discard).
	Logger hclog.Logger
	// Repair cuts the log at the first damage instead of refusing it.
	Repair bool
	// OnRefusal is called with every damage found on a read or at Open (a
	// *GuardError), OnFailure once with the class of the failure that
	// closes the store to writes. Either may be nil.
	OnRefusal func(error)
	OnFailure func(class string)
}

// Open opens (or creates) the store in dir: it replays every segment and
// verifies every record; a torn tail (the unacknowledged last batch) is
// cut, while damage before it makes Open fail with ErrCorrupt and a
// diagnostic (segment, offset, index), unless cfg.Repair is set.
//
// The Writer it returns writes the log's entries without any of the
// guard's checks: package wal keeps it behind the persist guard, and so
// should any other caller. Its Store is the rest of the log.
func Open(dir string, cfg Config) (*Writer, error) {
	if cfg.FS == nil {
		cfg.FS = vfs.OSFS{}
	}
	cfg.SegmentSize = min(max(cfg.SegmentSize, segHeaderSize+1), maxSegmentSize)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := vfs.MkdirAll(cfg.FS, dir, 0o700); err != nil { // durable: a first start's directory
		return nil, err
	}
	stable, err := openStable(filepath.Join(dir, stableFile))
	if err != nil {
		return nil, fmt.Errorf("wal: open stable store: %w", err)
	}
	s := &Store{dir: dir, cfg: cfg, stable: stable, cache: newEntryCache(cfg.CacheSize)}
	s.def.init()
	if err := s.load(); err != nil {
		stable.Close()
		return nil, err
	}
	return &Writer{s: s}, nil
}

// Writer is the write side of a Store: the appends and deletions the
// persist guard decided, and the raw reads it verifies. It checks nothing
// the guard checks (package wal). Every method but ReadEntry must be called
// with the write lock held (Lock), which also serialises the Store's own
// writes.
type Writer struct {
	s *Store
}

var _ sync.Locker = (*Writer)(nil)

// Store returns the store this Writer writes.
func (w *Writer) Store() *Store { return w.s }

// Floor returns the store's commit floor, which the guard decides against.
func (w *Writer) Floor() *Floor { return &w.s.floor }

// Lock takes the store's write lock.
func (w *Writer) Lock() { w.s.wmu.Lock() }

// Unlock releases the store's write lock.
func (w *Writer) Unlock() { w.s.wmu.Unlock() }

// Writable returns the log's shape when it takes writes: ErrClosed after
// Close, ErrFailed after a write or sync error.
func (w *Writer) Writable() (Shape, error) { return w.s.writable() }

// ReadEntry reads the entry at index as stored, checked against its record
// checksum (damage is refused with an error matching ErrCorrupt, and
// reported to OnRefusal) but not against its stamp. where, when not nil,
// locates the record. It needs no lock.
func (w *Writer) ReadEntry(index uint64, out *raft.Log) (where *Where, err error) {
	return w.s.readEntry(index, out)
}

// Append writes entries (accepted by the guard, every one stamped) with one
// write and makes them durable with one fsync before it returns, floor (the
// commit floor they were accepted under) in their frame.
func (w *Writer) Append(entries []*raft.Log, floor uint64) error {
	return w.s.appendBatch(entries, floor)
}

// AppendDeferred puts entries (accepted, stamped) into the log without
// waiting for the disk: durable once Store.Durable reaches them.
func (w *Writer) AppendDeferred(entries []*raft.Log, floor uint64) error {
	return w.s.appendDeferred(entries, floor)
}

// Compact removes the entries through max (a prefix, max below the last
// index): durable when it returns.
func (w *Writer) Compact(max uint64) error {
	return w.s.removeQuiesced(func() error { return w.s.compact(max) })
}

// Truncate removes the entries from min on (a suffix); prevTerm is the
// term of entry min-1, the new last. Durable when it returns.
func (w *Writer) Truncate(min, prevTerm uint64) error {
	return w.s.removeQuiesced(func() error { return w.s.truncate(min, prevTerm) })
}

// Reset removes the whole log; the floor stays. Durable when it returns.
func (w *Writer) Reset() error { return w.s.removeQuiesced(w.s.reset) }

// Where locates a stored record for a refusal's diagnostic.
type Where struct {
	Shape   Shape
	Segment string
	Offset  int64
}
