package segment

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Deferred appends (StoreLogsDeferred): the batch is checked by the guard
// and becomes part of the log at once — LastIndex, GetLog and every later
// write see it — while its frame waits in memory for the log's writer,
// which writes every waiting frame with one write and makes them durable
// with one fsync (group commit). Durable tells how far the disk holds the
// log. A Raft leader appends this way so that it replicates while its own
// disk syncs (the Raft thesis, §10.2.1); it must then count itself towards
// a commit only up to Durable (raft.Node does, docs/node.md).
//
// The crash model is that of StoreLogs: what waits is one batch frame (the
// records of every deferred batch since the writer last took one, under one
// header), at most one written but unsynced frame exists at any time, at
// the tail (the writer writes the next only after the previous one is
// synced, and every synchronous write first makes everything waiting
// durable), so a crash leaves a prefix of the log with at most its last
// frame torn, which Open cuts whole. What was only waiting
// in memory is lost with the process: it was never durable, and Durable
// never said it was.

// region is one batch frame of the tail segment that is in the log but not
// yet on disk: the bytes of the file from offset from on, the records of
// every deferred batch since the writer last took one, its header put when
// the writer takes it.
type region struct {
	seg         *segment
	from        int64
	buf         []byte
	first, last uint64 // indexes of the entries it holds
	count       int    // entries it holds
	floor       uint64 // the highest floor among its batches
}

func (r *region) empty() bool { return len(r.buf) == 0 }

// bytes returns the record at offset off of seg, n bytes, if the region
// holds it.
func (r *region) bytes(seg *segment, off int64, n uint32) []byte {
	if r.empty() || seg != r.seg || off < r.from || off+int64(n) > r.from+int64(len(r.buf)) {
		return nil
	}
	b := make([]byte, n)
	copy(b, r.buf[off-r.from:])
	return b
}

// deferState is the log's writer and what it waits to write. pend and
// inflight are guarded by Store.mu.
type deferState struct {
	// flushMu is held while a region is written and synced, by the writer
	// and by every synchronous write (under wmu, after it): the file's end
	// is then the tail's end.
	flushMu  sync.Mutex
	pend     region // frames appended since the writer last took them
	inflight region // frames the writer is writing and syncing
	spare    []byte // the buffer of the last frame written, for the next
	changed  chan struct{}
	durable  atomic.Uint64 // Durable, published under mu
	once     sync.Once
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

func (d *deferState) init() {
	d.changed = make(chan struct{})
	d.kick = make(chan struct{}, 1)
	d.stop = make(chan struct{})
	d.done = make(chan struct{})
}

// notifyLocked wakes the waiters of DurableChanged (mu held).
func (d *deferState) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// Durable returns the index up to which every entry of the log is on disk:
// the last index, less what deferred appends still hold in memory. It takes
// no lock, so a commit floor function (SetCommitFloor) may call it.
func (l *Store) Durable() uint64 { return l.def.durable.Load() }

// Syncs returns how many fsyncs made appended entries durable since the
// log was opened: one per synchronous StoreLogs and one per group of
// deferred appends the writer synced (segment creation, truncation and the
// stable store are not counted). Its growth per entry stored tells how
// well appends are grouped.
func (l *Store) Syncs() uint64 { return l.syncs.Load() }

// setDurableLocked publishes Durable after the log's end or what waits in
// memory moved (mu held).
func (l *Store) setDurableLocked() { l.def.durable.Store(l.durableLocked()) }

func (l *Store) durableLocked() uint64 {
	switch {
	case !l.def.inflight.empty():
		return l.def.inflight.first - 1
	case !l.def.pend.empty():
		return l.def.pend.first - 1
	}
	return l.last
}

// DurableChanged returns a channel that is closed when Durable next moves
// forward, or when the log fails or closes (then Durable stays where it
// is: check Failure, or expect ErrClosed).
func (l *Store) DurableChanged() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.def.changed
}

// appendDeferred puts a batch the guard accepted into the log without
// waiting for the disk: its records join the frame that waits for the
// writer (one frame for everything waiting, its header written when the
// writer takes it, so a crash keeps it whole or cuts it whole as a torn
// tail). A batch that must start a segment (an empty log, a full tail), or
// that would make the waiting frame larger than a batch may be, is appended
// synchronously instead. wmu held.
func (l *Store) appendDeferred(entries []*raft.Log, floor uint64) error {
	sh, err := l.writable()
	if err != nil {
		return err
	}
	tail := l.segs[len(l.segs)-1]
	floor = max(floor, l.floor.Now())
	size := batchSize(entries)
	l.mu.RLock()
	waiting := len(l.def.pend.buf)
	l.mu.RUnlock()
	if sh.Last == 0 || tail.size >= l.cfg.SegmentSize || uint64(waiting+size) > maxBatch {
		return l.appendBatch(entries, floor)
	}
	sampleBatch(len(entries), size)
	l.mu.Lock()
	p := &l.def.pend
	if p.empty() {
		// The frame's header is put when the writer takes the frame; its
		// buffer is the last frame's, written, when there is one.
		*p = region{seg: tail, from: tail.size, first: entries[0].Index, buf: slices.Grow(l.def.spare[:0], size)[:frameHeaderSize]}
		l.def.spare = nil
		tail.size += frameHeaderSize
	}
	// The batch's records, after the waiting ones, in the waiting frame.
	frameAt := tail.size
	n := len(p.buf)
	for _, e := range entries {
		p.buf = appendRecord(p.buf, e)
	}
	p.count += len(entries)
	p.last, p.floor = entries[len(entries)-1].Index, max(p.floor, floor)
	tail.size += int64(len(p.buf) - n)
	l.publishLocked(tail, entries, frameAt)
	l.mu.Unlock()
	l.def.once.Do(func() { go l.writer() })
	select {
	case l.def.kick <- struct{}{}:
	default:
	}
	return nil
}

// writer writes and syncs what deferred appends left, until Close.
func (l *Store) writer() {
	defer close(l.def.done)
	for {
		select {
		case <-l.def.kick:
		case <-l.def.stop:
			return
		}
		l.def.flushMu.Lock()
		_ = l.flushLocked() // a failure fails the log: every later call says so
		l.def.flushMu.Unlock()
	}
}

// quiesce makes everything deferred appends left durable and holds the
// writer off until the returned function is called: the file's end is the
// tail's end. wmu held.
func (l *Store) quiesce() (release func(), err error) {
	l.def.flushMu.Lock()
	if err := l.flushLocked(); err != nil {
		l.def.flushMu.Unlock()
		return nil, err
	}
	return l.def.flushMu.Unlock, nil
}

// flushLocked writes the waiting frames with one write and syncs them with
// one fsync. flushMu held.
func (l *Store) flushLocked() error {
	l.mu.Lock()
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	r := l.def.pend
	if r.empty() {
		l.mu.Unlock()
		return nil
	}
	frameHeader{Kind: frameBatch, Count: uint32(r.count), Floor: r.floor, BodyLen: uint32(len(r.buf) - frameHeaderSize)}.put(r.buf)
	l.def.pend, l.def.inflight = region{}, r
	l.mu.Unlock()
	if err := l.writeAt(r.seg, r.buf, r.from); err != nil {
		return l.fail(FailWrite, fmt.Errorf("wal: write batches [%d,%d]: %w", r.first, r.last, err))
	}
	start := time.Now()
	if err := r.seg.f.Sync(); err != nil {
		return l.fail(FailSync, fmt.Errorf("wal: sync batches [%d,%d]: %w", r.first, r.last, err))
	}
	measureFsync(start)
	l.syncs.Add(1)
	l.floor.Raise(r.floor)
	l.mu.Lock()
	l.def.inflight = region{}
	if cap(r.buf) <= maxKeptBuf {
		l.def.spare = r.buf[:0] // nothing refers to it now: the next frame's
	}
	l.setDurableLocked()
	l.def.notifyLocked()
	l.mu.Unlock()
	return nil
}

// stopWriter ends the writer goroutine, if it was started, after the
// region it is writing. wmu held, flushMu not.
func (l *Store) stopWriter() {
	started := true
	l.def.once.Do(func() { started = false })
	close(l.def.stop)
	if started {
		<-l.def.done
	}
}

// pendingRecord returns the bytes of a record still in memory (mu held).
func (l *Store) pendingRecord(seg *segment, off int64, n uint32) []byte {
	if b := l.def.inflight.bytes(seg, off, n); b != nil {
		return b
	}
	return l.def.pend.bytes(seg, off, n)
}

// writeAt writes buf at offset at of seg's file and, when it reaches past
// the zeros preallocated so far, zeros after it (up to the prealloc chunk,
// within the segment size): the next fsyncs then overwrite allocated blocks
// instead of growing the file, which spares ext4 and others a journal
// commit per batch. The caller syncs both with one fsync. flushMu (or wmu
// with nothing deferred) held.
func (l *Store) writeAt(seg *segment, buf []byte, at int64) error {
	if n, err := seg.f.WriteAt(buf, at); err != nil || n != len(buf) {
		if err == nil {
			err = io.ErrShortWrite
		}
		return err
	}
	end := at + int64(len(buf))
	if end > seg.alloc && l.cfg.Prealloc > 0 {
		to := max(end, min(end+l.cfg.Prealloc, l.cfg.SegmentSize))
		for off := end; off < to; {
			n := min(to-off, int64(len(zeros)))
			if _, err := seg.f.WriteAt(zeros[:n], off); err != nil {
				return err
			}
			off += n
		}
		seg.alloc = to
	}
	seg.alloc = max(seg.alloc, end)
	return nil
}
