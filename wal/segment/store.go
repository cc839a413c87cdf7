package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/vfs"
	bolt "go.etcd.io/bbolt"
)

// Store is the segment-file store behind wal.Log's guard, and a bbolt
// raft.StableStore in the same directory. It decides nothing: the guard
// checks every write before the store does it (through the Writer Open
// returned) and verifies every read after. Its own methods are what the
// log offers besides the guarded reads and writes: bounds, durability,
// failure, the commit floor, the term index and the stable store. Writes
// are serialised (wmu), reads run concurrently with them.
type Store struct {
	dir    string
	cfg    Config
	stable *bolt.DB
	floor  Floor

	wmu sync.Mutex // serialises StoreLogs, DeleteRange and Close

	mu                    sync.RWMutex // guards everything below
	segs                  []*segment   // in index order; the last is the tail
	first, last, lastTerm uint64
	nextSeq               uint64
	failed                error
	failClass             string // FailSync, FailWrite or FailNoSpace once failed
	closed                bool
	cache                 *entryCache
	terms                 termIndex // where each term began (terms.go)
	repaired              *RepairReport

	def   deferState    // deferred appends and the writer (deferred.go)
	syncs atomic.Uint64 // fsyncs that made batch frames durable (Syncs)

	// wbuf is the frame buffer of synchronous appends, reused (wmu).
	wbuf []byte
}

// maxKeptBuf bounds a frame buffer the log keeps for reuse: a larger one
// (a rare large batch) is left to the collector.
const maxKeptBuf = 1 << 20

// segment is one open segment file and the live entries it holds.
type segment struct {
	seq   uint64
	path  string
	f     vfs.File
	base  uint64   // index of offs[0]; 0 while a reset segment holds nothing
	offs  []uint32 // record offsets of live entries base, base+1, ...
	lens  []uint32
	size  int64 // end of the frames: where the tail's next frame goes
	alloc int64 // bytes in the file: frames, then zeros preallocated
	// version is the format version in the segment's header; frames of a
	// newer version are never appended to it.
	version uint16
}

func (s *segment) lastIndex() uint64 {
	if len(s.offs) == 0 {
		return 0
	}
	return s.base + uint64(len(s.offs)) - 1
}

func segName(seq uint64) string { return fmt.Sprintf("%020d.seg", seq) }

func parseSegName(name string) (uint64, bool) {
	if !strings.HasSuffix(name, ".seg") || len(name) != 24 {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 10, 64)
	return n, err == nil
}

// createSegment creates the next segment file with a durable header (and,
// unless it is a reset or the log is empty, a first-index mark). Its
// creation is durable when it returns (file and directory synced).
func (l *Store) createSegment(base uint64, flags uint16) (*segment, error) {
	fs := l.cfg.FS
	seq := l.nextSeq
	path := filepath.Join(l.dir, segName(seq))
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		// Fail closed like any write error: the file may exist in part.
		return nil, l.fail(FailWrite, fmt.Errorf("wal: create segment: %w", err))
	}
	hdr := segHeader{Version: formatVersion, Flags: flags, Seq: seq, Base: base, Floor: l.floor.Now()}
	buf := hdr.encode()
	if flags&segFlagReset == 0 && l.last != 0 {
		// Carry the first index on (first.go); first <= base-1 here.
		buf = append(buf, firstMarkFrame(l.first, hdr.Floor)...)
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return nil, l.fail(FailWrite, fmt.Errorf("wal: write segment header: %w", err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, l.fail(FailSync, fmt.Errorf("wal: sync segment header: %w", err))
	}
	if err := fs.SyncDir(l.dir); err != nil {
		f.Close()
		return nil, l.fail(FailSync, fmt.Errorf("wal: sync directory: %w", err))
	}
	l.floor.Raise(hdr.Floor)
	l.nextSeq++
	n := int64(len(buf))
	return &segment{seq: seq, path: path, f: f, base: base, size: n, alloc: n, version: hdr.Version}, nil
}

// fail makes the log refuse every further write; class says what failed
// (FailSync, FailWrite; FailNoSpace overrides either when err is ENOSPC).
// Called with wmu held.
func (l *Store) fail(class string, err error) error {
	l.mu.Lock()
	first := l.failed == nil
	if first {
		l.failed = err
		if errors.Is(err, syscall.ENOSPC) {
			class = FailNoSpace
		}
		l.failClass = class
		l.cfg.Logger.Error("log failed; refusing writes until reopened", "class", class, "error", err)
		l.def.notifyLocked()
	}
	l.mu.Unlock()
	if first && l.cfg.OnFailure != nil {
		l.cfg.OnFailure(class)
	}
	return fmt.Errorf("%w: %w", ErrFailed, err)
}

// SetCommitFloor binds the commit floor: fn returns the highest index known
// committed (the node passes max(raft commit index, applied index)). The
// floor observed at each StoreLogs is persisted with that batch, so after a
// restart a truncation at or below it is refused before raft has learned
// anything. fn must be cheap and must not call back into the log. Never
// bound, the log trusts raft's compactions instead (see the package doc).
func (l *Store) SetCommitFloor(fn func() uint64) { l.floor.Set(fn) }

// Floor returns the current commit floor (bound source or persisted).
func (l *Store) Floor() uint64 { return l.floor.Now() }

// PersistedFloor returns the highest floor this log has made durable.
func (l *Store) PersistedFloor() uint64 { return l.floor.Persisted() }

// Repaired reports what Open cut when it was given Repair, or nil.
func (l *Store) Repaired() *RepairReport { return l.repaired }

// IsMonotonic implements raft.MonotonicLogStore: the log never has gaps, so
// hashicorp/raft resets it after a snapshot install (avoiding issue #697).
func (l *Store) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (l *Store) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return l.first, nil
}

// LastIndex implements raft.LogStore.
func (l *Store) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return l.last, nil
}

func (l *Store) shapeNow() Shape {
	return Shape{First: l.first, Last: l.last, LastTerm: l.lastTerm, Floor: l.floor.Now()}
}

// segmentFor returns the segment holding index i (mu held). Segments are
// few (the log's size over the segment size) and reads are mostly near the
// tail, so it scans from the tail; segments without live entries (a
// truncation or reset marker not yet written to) are skipped.
func (l *Store) segmentFor(i uint64) *segment {
	for k := len(l.segs) - 1; k >= 0; k-- {
		s := l.segs[k]
		if len(s.offs) == 0 || i < s.base {
			continue
		}
		if i <= s.lastIndex() {
			return s
		}
		return nil
	}
	return nil
}

// readRecord reads the raw record of index i (mu held for reading).
func (l *Store) readRecord(i uint64) ([]byte, *segment, int64, error) {
	s := l.segmentFor(i)
	if s == nil {
		return nil, nil, 0, raft.ErrLogNotFound
	}
	k := i - s.base
	off, n := int64(s.offs[k]), s.lens[k]
	if b := l.pendingRecord(s, off, n); b != nil {
		return b, s, off, nil
	}
	buf := make([]byte, n)
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return nil, s, off, fmt.Errorf("wal: read index %d: %w", i, err)
	}
	return buf, s, off, nil
}

// readEntry reads the entry at index: from the cache, or from its segment,
// checked against its record checksum (a damaged record is refused with an
// error matching ErrCorrupt, and reported). The guard verifies the stamp.
func (l *Store) readEntry(index uint64, out *raft.Log) (*Where, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	if l.last == 0 || index < l.first || index > l.last {
		l.mu.RUnlock()
		return nil, raft.ErrLogNotFound
	}
	if e := l.cache.get(index); e != nil {
		l.mu.RUnlock()
		*out = *e
		return nil, nil
	}
	buf, seg, off, err := l.readRecord(index)
	sh := l.shapeNow()
	l.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	ri, err := decodeRecord(buf, out)
	if err == nil && ri.Index != index {
		err = fmt.Errorf("record holds index %d", ri.Index)
	}
	if err != nil {
		*out = raft.Log{}
		g := sh.Refusal(OpGet, ErrCorrupt)
		g.Index, g.Term, g.Segment, g.Offset, g.Detail = index, ri.Term, filepath.Base(seg.path), off, err.Error()
		l.refused(g)
		return nil, g
	}
	return &Where{Shape: sh, Segment: filepath.Base(seg.path), Offset: off}, nil
}

// appendBatch writes entries (accepted by the guard, stamped) with one
// write and makes them durable with one fsync before it returns (G7), the
// commit floor in the batch's frame; whatever deferred appends left is made
// durable first. wmu held.
func (l *Store) appendBatch(entries []*raft.Log, floor uint64) error {
	sh, err := l.writable()
	if err != nil {
		return err
	}
	release, err := l.quiesce()
	if err != nil {
		return err
	}
	defer release()
	// Start a new segment when the tail is full, or when the log is empty
	// and the tail expects another first index.
	tail := l.segs[len(l.segs)-1]
	e0 := entries[0].Index
	switch {
	case sh.Last == 0 && tail.base != 0 && tail.base != e0:
		seg, err := l.createSegment(0, segFlagReset)
		if err != nil {
			return err
		}
		l.rotateTo(seg, true)
	case sh.Last != 0 && tail.size >= l.cfg.SegmentSize:
		seg, err := l.createSegment(e0, 0)
		if err != nil {
			return err
		}
		l.rotateTo(seg, false)
	}
	tail = l.segs[len(l.segs)-1]

	floor = max(floor, l.floor.Now())
	buf := encodeBatch(l.wbuf[:0], entries, floor)
	defer l.keepWriteBuf(buf)
	frameAt := tail.size
	if err := l.writeTail(tail, buf); err != nil {
		return l.fail(FailWrite, fmt.Errorf("wal: write batch [%d,%d]: %w", e0, e0+uint64(len(entries))-1, err))
	}
	start := time.Now()
	if err := tail.f.Sync(); err != nil {
		return l.fail(FailSync, fmt.Errorf("wal: sync batch [%d,%d]: %w", e0, e0+uint64(len(entries))-1, err))
	}
	measureFsync(start)
	l.syncs.Add(1)
	sampleBatch(len(entries), len(buf))
	l.floor.Raise(floor)

	l.mu.Lock()
	l.publishLocked(tail, entries, frameAt+frameHeaderSize)
	l.def.notifyLocked()
	l.mu.Unlock()
	return nil
}

// keepWriteBuf keeps buf, written, for the next synchronous append (wmu).
func (l *Store) keepWriteBuf(buf []byte) {
	if cap(buf) <= maxKeptBuf {
		l.wbuf = buf[:0]
	}
}

// batchSize is the length of the frame encodeBatch makes of entries.
func batchSize(entries []*raft.Log) int {
	size := frameHeaderSize
	for _, e := range entries {
		size += recordSize(e)
	}
	return size
}

// encodeBatch appends entries, as one batch frame under floor, to b (whose
// capacity it reuses) and returns the frame.
func encodeBatch(b []byte, entries []*raft.Log, floor uint64) []byte {
	b = slices.Grow(b[:0], batchSize(entries))[:frameHeaderSize]
	for _, e := range entries {
		b = appendRecord(b, e)
	}
	frameHeader{Kind: frameBatch, Count: uint32(len(entries)), Floor: floor, BodyLen: uint32(len(b) - frameHeaderSize)}.put(b)
	return b
}

// publishLocked makes a batch's entries part of the log: the index of the
// tail (their records one after the other from offset at) and the cache.
// mu held.
func (l *Store) publishLocked(tail *segment, entries []*raft.Log, at int64) {
	if len(tail.offs) == 0 {
		tail.base = entries[0].Index
	}
	for _, e := range entries {
		n := recordSize(e)
		tail.offs = append(tail.offs, uint32(at))
		tail.lens = append(tail.lens, uint32(n))
		at += int64(n)
		l.cache.put(e)
	}
	if l.last == 0 {
		l.first = entries[0].Index
	}
	if l.last == 0 {
		l.terms.restart(entries[0].Index, entries[0].Term)
	}
	for _, e := range entries {
		l.terms.note(e.Index, e.Term)
	}
	last := entries[len(entries)-1]
	l.last, l.lastTerm = last.Index, last.Term
	l.setDurableLocked()
}

// CheckFits refuses a batch the segment format cannot hold: a record
// (with the stamp the store adds) above maxRecord, or a frame body above
// its 32-bit length. Written, such a batch would be acknowledged and then
// read by Open as damage, or cut as a torn tail.
func CheckFits(s Shape, entries []*raft.Log) *GuardError {
	var body uint64
	for _, e := range entries {
		n := uint64(recordSize(e))
		if _, ok := ParseStamp(e.Extensions); !ok {
			n += stampSize
		}
		body += n
		if n > maxRecord || body > maxBatch {
			g := s.Refusal(OpStore, ErrTooLarge)
			g.Index, g.Term = e.Index, e.Term
			g.Detail = fmt.Sprintf("record of %d bytes (at most %d), batch body of %d bytes so far (at most %d)",
				n, maxRecord, body, uint64(maxBatch))
			return g
		}
	}
	return nil
}

// rotateTo makes seg the tail; reset drops every older segment. wmu held.
func (l *Store) rotateTo(seg *segment, reset bool) {
	l.mu.Lock()
	var drop []*segment
	if reset {
		drop = l.segs
		l.segs = nil
	}
	l.segs = append(l.segs, seg)
	l.mu.Unlock()
	l.keepSegments(l.removeSegments(drop))
}

// removeSegments closes and deletes segment files no longer needed, in the
// order given: callers order them so that any prefix of the removals leaves
// files that replay to the log (oldest first for a compaction, newest first
// for a truncation). So it stops at the first removal that fails: removing
// a later file after it could leave a gap (Open refuses the log), or leave
// a file that nothing supersedes any more. The files not removed are
// returned, still open, for keepSegments. wmu held.
func (l *Store) removeSegments(drop []*segment) (kept []*segment) {
	removed := 0
	for i, s := range drop {
		if err := l.cfg.FS.Remove(s.path); err != nil && !os.IsNotExist(err) {
			l.cfg.Logger.Warn("could not remove segment; keeping it and the segments after it for a later retry",
				"segment", s.path, "error", err)
			kept = drop[i:]
			break
		}
		s.f.Close()
		removed++
	}
	if removed > 0 {
		if err := l.cfg.FS.SyncDir(l.dir); err != nil {
			l.cfg.Logger.Warn("could not sync directory after removing segments", "error", err)
		}
	}
	return kept
}

// keepSegments puts segments whose removal failed back into the segment
// list, in sequence order and without live entries, so that the next
// compaction, truncation or reset removes them first (a compaction never
// removes a later segment before them). wmu held.
func (l *Store) keepSegments(kept []*segment) {
	if len(kept) == 0 {
		return
	}
	l.mu.Lock()
	for _, s := range kept {
		s.offs, s.lens = nil, nil
	}
	l.segs = append(l.segs, kept...)
	sort.SliceStable(l.segs, func(i, j int) bool { return l.segs[i].seq < l.segs[j].seq })
	l.mu.Unlock()
}

// refused reports a refusal (damage found on a read or at Open) to the
// OnRefusal hook.
func (l *Store) refused(err error) {
	if fn := l.cfg.OnRefusal; fn != nil {
		fn(err)
	}
}

// writable returns the log's Shape when it may be written to: not closed,
// not failed. wmu held.
func (l *Store) writable() (Shape, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Shape{}, ErrClosed
	}
	if l.failed != nil {
		return Shape{}, fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return l.shapeNow(), nil
}

// zeros is the source of preallocation writes (read-only).
var zeros = make([]byte, 1<<20)

// writeTail writes buf at the tail's end (and preallocates after it, see
// writeAt) and advances it. Nothing deferred may be waiting. wmu held.
func (l *Store) writeTail(tail *segment, buf []byte) error {
	if err := l.writeAt(tail, buf, tail.size); err != nil {
		return err
	}
	l.mu.Lock()
	tail.size += int64(len(buf))
	l.mu.Unlock()
	return nil
}
