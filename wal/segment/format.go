package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// On-disk format, version 2. All integers little endian. docs/wal.md draws
// the same layout and states crash safety per operation.
//
// Versions: a segment's header says which version wrote it, and a log may
// mix versions (an older log continues in newer segments). Version 1 has no
// first-index mark (frame kind 3), so a compaction inside a segment was not
// durable. Version 2 adds that mark and nothing else; version 1 segments are
// read as before and never get a version 2 frame appended: the writer
// rotates to a new segment first.
//
// A log directory holds segment files named %020d.seg by sequence number, and
// stable.db (bbolt, the raft.StableStore). Segments are replayed in sequence
// order.
//
// Segment header (48 bytes):
//
//	 0  [8]  magic "JRWALSEG"
//	 8  u16  format version (1 or 2)
//	10  u16  flags: 1 = reset (discard every earlier segment)
//	12  u32  reserved, 0
//	16  u64  sequence number (equals the file name's)
//	24  u64  base: index of the first entry this segment holds; 0 for a
//	         reset segment not yet written. A base at or below the log's last
//	         index at replay truncates the log to base-1: that is how a suffix
//	         truncation is made durable.
//	32  u64  commit floor when the segment was created
//	40  u32  reserved, 0
//	44  u32  CRC32C of bytes [0, 44)
//
// Then frames, back to back. Frame header (32 bytes):
//
//	 0  [4]  magic "JRB1"
//	 4  u32  CRC32C of bytes [8, 32)
//	 8  u8   kind: 1 = batch of entries, 2 = floor mark (no entries),
//	         3 = first-index mark (no entries; version 2 segments only)
//	 9  [3]  reserved, 0
//	12  u32  entry count
//	16  u64  commit floor observed when the frame was written
//	24  u32  body length in bytes (the entry records that follow)
//	28  u32  reserved, 0
//
// First-index mark body (16 bytes): the log's first index from here on, so
// a compaction is durable per entry, not per segment (entries of a partly
// compacted segment below it do not reappear after a restart):
//
//	 0  u64  first index (> 0)
//	 8  u32  reserved, 0
//	12  u32  CRC32C of bytes [0, 12)
//
// Entry record (48 bytes + extensions + data):
//
//	 0  u32  record length (48 + ext length + data length)
//	 4  u32  CRC32C of bytes [8, 48) and of the extensions
//	 8  u64  index
//	16  u64  term
//	24  i64  appended-at, unix nanoseconds
//	32  u32  data length
//	36  u32  extensions length
//	40  u8   raft.LogType
//	41  [7]  reserved, 0
//	48  ...  extensions (always ending with a payload stamp, see stamp.go)
//	    ...  data
//
// The record CRC covers the header and the extensions; the data is covered
// by the stamp's CRC32C inside the extensions, so each byte is checksummed
// once. A batch is written with one write and made durable with one fsync.
const (
	formatVersion   = 2 // written by this code
	oldestVersion   = 1 // the oldest this code reads
	segHeaderSize   = 48
	frameHeaderSize = 32
	recHeaderSize   = 48
	firstMarkSize   = 16

	segFlagReset = 1

	frameBatch = 1
	frameFloor = 2
	frameFirst = 3

	// firstMarkVersion is the first format version with frameFirst.
	firstMarkVersion = 2

	// maxRecord bounds one entry record (and so a data length read from
	// disk) to keep a corrupt length from allocating wildly.
	maxRecord = 1 << 30
	// maxBatch bounds one frame's body and maxSegmentSize the size after
	// which a segment rotates, so every record offset in a segment stays
	// below 2^31 and fits the index's 32 bits.
	maxBatch       = 1 << 30
	maxSegmentSize = 1 << 30
)

var (
	segMagic   = []byte("JRWALSEG")
	frameMagic = []byte("JRB1")
)

type segHeader struct {
	Version uint16
	Flags   uint16
	Seq     uint64
	Base    uint64
	Floor   uint64
}

func (h segHeader) encode() []byte {
	b := make([]byte, segHeaderSize)
	copy(b[0:8], segMagic)
	binary.LittleEndian.PutUint16(b[8:], h.Version)
	binary.LittleEndian.PutUint16(b[10:], h.Flags)
	binary.LittleEndian.PutUint64(b[16:], h.Seq)
	binary.LittleEndian.PutUint64(b[24:], h.Base)
	binary.LittleEndian.PutUint64(b[32:], h.Floor)
	binary.LittleEndian.PutUint32(b[44:], Checksum(b[:44]))
	return b
}

func decodeSegHeader(b []byte) (segHeader, error) {
	if len(b) < segHeaderSize {
		return segHeader{}, fmt.Errorf("segment header: %d bytes, want %d", len(b), segHeaderSize)
	}
	if !bytes.Equal(b[0:8], segMagic) {
		return segHeader{}, fmt.Errorf("segment header: bad magic")
	}
	if got, want := Checksum(b[:44]), binary.LittleEndian.Uint32(b[44:]); got != want {
		return segHeader{}, fmt.Errorf("segment header: crc %08x, stored %08x", got, want)
	}
	h := segHeader{
		Version: binary.LittleEndian.Uint16(b[8:]),
		Flags:   binary.LittleEndian.Uint16(b[10:]),
		Seq:     binary.LittleEndian.Uint64(b[16:]),
		Base:    binary.LittleEndian.Uint64(b[24:]),
		Floor:   binary.LittleEndian.Uint64(b[32:]),
	}
	return h, h.Validate()
}

// Validate checks a decoded segment header's invariants.
func (h segHeader) Validate() error {
	if h.Version < oldestVersion || h.Version > formatVersion {
		return fmt.Errorf("segment header: unsupported format version %d (this code reads %d to %d)", h.Version, oldestVersion, formatVersion)
	}
	if h.Flags&^segFlagReset != 0 {
		return fmt.Errorf("segment header: unknown flags %#x", h.Flags)
	}
	if h.Flags&segFlagReset == 0 && h.Base == 0 {
		return fmt.Errorf("segment header: base 0 without reset flag")
	}
	return nil
}

type frameHeader struct {
	Kind    uint8
	Count   uint32
	Floor   uint64
	BodyLen uint32
}

func (h frameHeader) put(b []byte) {
	copy(b[0:4], frameMagic)
	b[8] = h.Kind
	b[9], b[10], b[11] = 0, 0, 0
	binary.LittleEndian.PutUint32(b[12:], h.Count)
	binary.LittleEndian.PutUint64(b[16:], h.Floor)
	binary.LittleEndian.PutUint32(b[24:], h.BodyLen)
	binary.LittleEndian.PutUint32(b[28:], 0)
	binary.LittleEndian.PutUint32(b[4:], Checksum(b[8:32]))
}

func decodeFrameHeader(b []byte) (frameHeader, error) {
	if len(b) < frameHeaderSize {
		return frameHeader{}, fmt.Errorf("frame header: %d bytes, want %d", len(b), frameHeaderSize)
	}
	if !bytes.Equal(b[0:4], frameMagic) {
		return frameHeader{}, fmt.Errorf("frame header: bad magic")
	}
	if got, want := Checksum(b[8:32]), binary.LittleEndian.Uint32(b[4:]); got != want {
		return frameHeader{}, fmt.Errorf("frame header: crc %08x, stored %08x", got, want)
	}
	h := frameHeader{
		Kind:    b[8],
		Count:   binary.LittleEndian.Uint32(b[12:]),
		Floor:   binary.LittleEndian.Uint64(b[16:]),
		BodyLen: binary.LittleEndian.Uint32(b[24:]),
	}
	return h, h.Validate()
}

// Validate checks a decoded frame header's invariants.
func (h frameHeader) Validate() error {
	switch h.Kind {
	case frameBatch:
		if h.Count == 0 || uint64(h.BodyLen) < uint64(h.Count)*recHeaderSize {
			return fmt.Errorf("frame header: batch of %d entries in %d bytes", h.Count, h.BodyLen)
		}
	case frameFloor:
		if h.Count != 0 || h.BodyLen != 0 {
			return fmt.Errorf("frame header: floor mark with a body")
		}
	case frameFirst:
		if h.Count != 0 || h.BodyLen != firstMarkSize {
			return fmt.Errorf("frame header: first-index mark of %d entries in %d bytes", h.Count, h.BodyLen)
		}
	default:
		return fmt.Errorf("frame header: unknown kind %d", h.Kind)
	}
	return nil
}

// putFirstMark encodes a first-index mark body into b (firstMarkSize bytes).
func putFirstMark(b []byte, first uint64) {
	binary.LittleEndian.PutUint64(b[0:], first)
	binary.LittleEndian.PutUint32(b[8:], 0)
	binary.LittleEndian.PutUint32(b[12:], Checksum(b[:12]))
}

// decodeFirstMark decodes and verifies a first-index mark body.
func decodeFirstMark(b []byte) (uint64, error) {
	if len(b) != firstMarkSize {
		return 0, fmt.Errorf("first-index mark: %d bytes, want %d", len(b), firstMarkSize)
	}
	if got, want := Checksum(b[:12]), binary.LittleEndian.Uint32(b[12:]); got != want {
		return 0, fmt.Errorf("first-index mark: crc %08x, stored %08x", got, want)
	}
	first := binary.LittleEndian.Uint64(b[0:])
	if first == 0 || binary.LittleEndian.Uint32(b[8:]) != 0 {
		return 0, fmt.Errorf("first-index mark: first index %d, reserved %d", first, binary.LittleEndian.Uint32(b[8:]))
	}
	return first, nil
}

func recordSize(l *raft.Log) int { return recHeaderSize + len(l.Extensions) + len(l.Data) }

// appendRecord encodes l (whose Extensions already carry a stamp) to b.
func appendRecord(b []byte, l *raft.Log) []byte {
	off := len(b)
	n := recordSize(l)
	b = append(b, make([]byte, recHeaderSize)...)
	h := b[off : off+recHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], uint32(n))
	binary.LittleEndian.PutUint64(h[8:], l.Index)
	binary.LittleEndian.PutUint64(h[16:], l.Term)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.LittleEndian.PutUint64(h[24:], uint64(at))
	binary.LittleEndian.PutUint32(h[32:], uint32(len(l.Data)))
	binary.LittleEndian.PutUint32(h[36:], uint32(len(l.Extensions)))
	h[40] = byte(l.Type)
	crc := Checksum(h[8:recHeaderSize])
	crc = crcUpdate(crc, l.Extensions)
	binary.LittleEndian.PutUint32(h[4:], crc)
	b = append(b, l.Extensions...)
	return append(b, l.Data...)
}

// recordInfo is a decoded record header.
type recordInfo struct {
	Len     uint32
	CRC     uint32
	Index   uint64
	Term    uint64
	At      int64
	DataLen uint32
	ExtLen  uint32
	Type    raft.LogType
}

func decodeRecordHeader(h []byte) (recordInfo, error) {
	if len(h) < recHeaderSize {
		return recordInfo{}, fmt.Errorf("record: %d header bytes, want %d", len(h), recHeaderSize)
	}
	r := recordInfo{
		Len:     binary.LittleEndian.Uint32(h[0:]),
		CRC:     binary.LittleEndian.Uint32(h[4:]),
		Index:   binary.LittleEndian.Uint64(h[8:]),
		Term:    binary.LittleEndian.Uint64(h[16:]),
		At:      int64(binary.LittleEndian.Uint64(h[24:])),
		DataLen: binary.LittleEndian.Uint32(h[32:]),
		ExtLen:  binary.LittleEndian.Uint32(h[36:]),
		Type:    raft.LogType(h[40]),
	}
	return r, r.Validate()
}

// Validate checks a record header's own invariants (not its CRC).
func (r recordInfo) Validate() error {
	if r.Len > maxRecord || uint64(r.Len) != uint64(recHeaderSize)+uint64(r.ExtLen)+uint64(r.DataLen) {
		return fmt.Errorf("record: length %d does not match header %d + ext %d + data %d", r.Len, recHeaderSize, r.ExtLen, r.DataLen)
	}
	if r.Index == 0 || r.Term == 0 {
		return fmt.Errorf("record: index %d term %d", r.Index, r.Term)
	}
	return nil
}

// decodeRecord decodes and verifies a whole record: its header CRC and the
// data against the stamp. rec must be exactly the record's bytes. The
// returned Log aliases rec.
func decodeRecord(rec []byte, out *raft.Log) (recordInfo, error) {
	ri, err := decodeRecordHeader(rec)
	if err != nil {
		return ri, err
	}
	if int(ri.Len) != len(rec) {
		return ri, fmt.Errorf("record: %d bytes, header says %d", len(rec), ri.Len)
	}
	ext := rec[recHeaderSize : recHeaderSize+ri.ExtLen]
	crc := crcUpdate(Checksum(rec[8:recHeaderSize]), ext)
	if crc != ri.CRC {
		return ri, fmt.Errorf("record: header crc %08x, stored %08x", crc, ri.CRC)
	}
	out.Index, out.Term, out.Type = ri.Index, ri.Term, ri.Type
	out.Extensions = ext
	out.Data = rec[recHeaderSize+ri.ExtLen:]
	if ri.At != 0 {
		out.AppendedAt = time.Unix(0, ri.At)
	} else {
		out.AppendedAt = time.Time{}
	}
	return ri, nil
}
