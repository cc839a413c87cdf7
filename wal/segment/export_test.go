package segment

import (
	"sync"

	"github.com/jobraft/jobraft/wal/vfs"
)

// The external tests of this directory (package segment_test) open a
// guarded wal.Log over a Store and check what it wrote on disk; package wal
// imports this one, so they cannot be internal tests. This file, compiled
// only into this package's tests, lends them the format, the scanner and a
// few of the Store's internals under exported names.

// The segment format's constants.
const (
	FormatVersion   = formatVersion
	SegHeaderSize   = segHeaderSize
	FrameHeaderSize = frameHeaderSize
	RecHeaderSize   = recHeaderSize
	FirstMarkSize   = firstMarkSize
	FrameBatch      = frameBatch
	StampSize       = stampSize
	MaxRecord       = maxRecord
	StableFile      = stableFile
)

// The term index's place in the stable store.
var (
	TermsBucket = termsBucket
	TermsKey    = termsKey
)

// SegHeader is a segment file's header.
type SegHeader = segHeader

// Encode returns the header's bytes.
func (h segHeader) Encode() []byte { return h.encode() }

// FrameHeader is a frame's header.
type FrameHeader = frameHeader

// Put writes the header into b's first FrameHeaderSize bytes.
func (h frameHeader) Put(b []byte) { h.put(b) }

// RecordInfo is a record's header, decoded.
type RecordInfo = recordInfo

// The format's codecs, the segment files of a directory and the stamp check
// of an operation.
var (
	SegName            = segName
	SegmentFiles       = segmentFiles
	DecodeSegHeader    = decodeSegHeader
	DecodeFrameHeader  = decodeFrameHeader
	DecodeRecordHeader = decodeRecordHeader
	DecodeRecord       = decodeRecord
	AppendRecord       = appendRecord
	FirstMarkFrame     = firstMarkFrame
	DecodeFirstMark    = decodeFirstMark
	EncodeTerms        = encodeTerms
	AllZero            = allZero
	VerifyStampFor     = verifyStamp
)

// Scanned is scanned (one segment file as read from disk) with its fields
// exported.
type Scanned struct {
	Name      string
	Hdr       SegHeader
	Size      int64
	End       int64
	Floor     uint64
	FirstMark uint64
	Recs      []ScanRec
	Frames    []ScanFrame
	Bad       *BadSpot
	AfterMax  uint64
}

// ScanFrame is scanFrame, exported.
type ScanFrame struct {
	Off, End   int64
	First, Cnt int
	Floor      uint64
	FirstMark  uint64
}

// ScanRec is scanRec, exported.
type ScanRec struct {
	Off   int64
	Len   uint32
	Info  RecordInfo
	Stamp StampInfo
}

// BadSpot is badSpot, exported.
type BadSpot struct {
	Off    int64
	Reason string
	Torn   bool
}

// ScanSegment is scanSegment.
func ScanSegment(fs vfs.FS, path string) (*Scanned, error) {
	s, err := scanSegment(fs, path)
	if err != nil {
		return nil, err
	}
	return exportScanned(s), nil
}

// ScanBytes is scanBytes.
func ScanBytes(name string, buf []byte) *Scanned { return exportScanned(scanBytes(name, buf)) }

func exportScanned(s *scanned) *Scanned {
	out := &Scanned{Name: s.name, Hdr: s.hdr, Size: s.size, End: s.end, Floor: s.floor, FirstMark: s.firstMark, AfterMax: s.afterMax}
	for _, r := range s.recs {
		out.Recs = append(out.Recs, ScanRec{Off: r.off, Len: r.len, Info: r.info, Stamp: r.stamp})
	}
	for _, f := range s.frames {
		out.Frames = append(out.Frames, ScanFrame{Off: f.off, End: f.end, First: f.first, Cnt: f.cnt, Floor: f.floor, FirstMark: f.firstMark})
	}
	if s.bad != nil {
		out.Bad = &BadSpot{Off: s.bad.off, Reason: s.bad.reason, Torn: s.bad.torn}
	}
	return out
}

// SegView is what the tests read of an open segment.
type SegView struct {
	Path string
	Base uint64
	Offs []uint32
	Size int64
}

// Mu is the lock that guards the Store's segments and its deferred state.
func (l *Store) Mu() *sync.RWMutex { return &l.mu }

// WMu is the Store's write lock.
func (l *Store) WMu() *sync.Mutex { return &l.wmu }

// FlushMu is the deferred writer's lock: held, the writer cannot take the
// batches waiting.
func (l *Store) FlushMu() *sync.Mutex { return &l.def.flushMu }

// Segs returns the open segments (Mu held).
func (l *Store) Segs() []SegView {
	out := make([]SegView, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegView{Path: s.path, Base: s.base, Offs: s.offs, Size: s.size}
	}
	return out
}

// Pend returns where the frame of the batches waiting for the writer
// starts and how many entries it holds (Mu held).
func (l *Store) Pend() (from int64, count int) { return l.def.pend.from, l.def.pend.count }

// WriteTail writes buf at the end of the tail segment as the store writes
// a frame (WMu held).
func (l *Store) WriteTail(buf []byte) error { return l.writeTail(l.segs[len(l.segs)-1], buf) }
