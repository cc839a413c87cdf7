package wal

import (
	"bytes"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// scanned is one segment file as read from disk.
type scanned struct {
	name  string
	hdr   segHeader
	size  int64  // bytes in the file
	end   int64  // where valid frames end: size, or the start of a zero tail
	floor uint64 // highest floor in the header or a valid frame
	// firstMark is the highest first-index mark in a valid frame (0: none).
	firstMark uint64
	recs      []scanRec // valid records of valid frames, in file order
	frames    []scanFrame
	// bad is the first damaged spot, nil when the whole file is valid.
	bad *badSpot
	// afterMax is the highest index in valid frames after bad (0 if none).
	afterMax uint64
}

type scanFrame struct {
	off, end   int64
	first, cnt int // recs[first : first+cnt]
	floor      uint64
	firstMark  uint64 // a first-index mark's index (kind 3), else 0
}

type scanRec struct {
	off  int64
	len  uint32
	info recordInfo
	// stamp of the record (every stored record carries one)
	stamp StampInfo
}

// badSpot is where a segment stops being valid.
type badSpot struct {
	off    int64
	reason string
	// torn: nothing valid follows the spot in this file, so it can be the
	// unacknowledged tail of a crashed write.
	torn bool
}

// scanSegment parses a whole segment file. It never fails on content: damage
// is reported in bad. Only IO errors are returned.
func scanSegment(fs FS, path string) (*scanned, error) {
	f, err := fs.OpenFile(path, osRDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return scanBytes(path, buf), nil
}

// scanBytes parses a segment held in memory (also the fuzz entry point).
func scanBytes(name string, buf []byte) *scanned {
	s := &scanned{name: name, size: int64(len(buf))}
	h, err := decodeSegHeader(buf)
	if err != nil {
		// A header is synced before any frame is written after it, so a
		// damaged header with no valid frame after it is a torn creation
		// (cut short, or zero-filled by a power loss).
		s.bad = &badSpot{off: 0, reason: err.Error(), torn: len(buf) < segHeaderSize || !validFrameAfter(buf, 0)}
		return s
	}
	s.hdr, s.floor = h, h.Floor
	off := int64(segHeaderSize)
	s.end = int64(len(buf))
	for off < int64(len(buf)) {
		fr, recs, reason := parseFrame(buf, off)
		if reason == "" && fr.firstMark != 0 && h.Version < firstMarkVersion {
			reason = fmt.Sprintf("first-index mark in a format version %d segment", h.Version)
		}
		if reason != "" && allZero(buf[off:]) {
			// Zeros to the end of the file: space preallocated for
			// frames not written yet, not damage.
			s.end = off
			return s
		}
		if reason != "" {
			s.bad = &badSpot{off: off, reason: reason, torn: !validFrameAfter(buf, off+1)}
			if !s.bad.torn {
				s.afterMax = maxIndexAfter(buf, off+1)
			}
			return s
		}
		fr.first = len(s.recs)
		s.recs = append(s.recs, recs...)
		s.frames = append(s.frames, fr)
		s.floor = max(s.floor, fr.floor)
		s.firstMark = max(s.firstMark, fr.firstMark)
		off = fr.end
	}
	return s
}

// parseFrame parses and fully verifies the frame at off. reason is "" when
// it is valid.
func parseFrame(buf []byte, off int64) (scanFrame, []scanRec, string) {
	fr := scanFrame{off: off}
	if int64(len(buf))-off < frameHeaderSize {
		return fr, nil, "frame header cut short"
	}
	fh, err := decodeFrameHeader(buf[off : off+frameHeaderSize])
	if err != nil {
		return fr, nil, err.Error()
	}
	body := off + frameHeaderSize
	end := body + int64(fh.BodyLen)
	if end > int64(len(buf)) {
		return fr, nil, fmt.Sprintf("frame body of %d bytes extends beyond the end of the file", fh.BodyLen)
	}
	fr.end, fr.cnt, fr.floor = end, int(fh.Count), fh.Floor
	switch fh.Kind {
	case frameFloor:
		return fr, nil, ""
	case frameFirst:
		first, err := decodeFirstMark(buf[body:end])
		if err != nil {
			return fr, nil, err.Error()
		}
		fr.firstMark = first
		return fr, nil, ""
	}
	recs := make([]scanRec, 0, fh.Count)
	p := body
	var l raft.Log
	for i := uint32(0); i < fh.Count; i++ {
		if end-p < recHeaderSize {
			return fr, nil, fmt.Sprintf("record %d of %d cut short", i, fh.Count)
		}
		ri, err := decodeRecordHeader(buf[p : p+recHeaderSize])
		if err != nil {
			return fr, nil, err.Error()
		}
		if int64(ri.Len) > end-p {
			return fr, nil, fmt.Sprintf("record %d of %d overruns its frame", i, fh.Count)
		}
		if _, err := decodeRecord(buf[p:p+int64(ri.Len)], &l); err != nil {
			return fr, nil, fmt.Sprintf("index %d: %v", ri.Index, err)
		}
		st, ok := ParseStamp(l.Extensions)
		if !ok {
			return fr, nil, fmt.Sprintf("index %d: record carries no stamp", ri.Index)
		}
		if uint32(len(l.Data)) != st.Len || Checksum(l.Data) != st.CRC {
			return fr, nil, fmt.Sprintf("index %d: data (len %d crc %08x) does not match its stamp (len %d crc %08x)",
				ri.Index, len(l.Data), Checksum(l.Data), st.Len, st.CRC)
		}
		if i > 0 && ri.Index != recs[i-1].info.Index+1 {
			return fr, nil, fmt.Sprintf("index %d follows %d inside one batch", ri.Index, recs[i-1].info.Index)
		}
		recs = append(recs, scanRec{off: p, len: ri.Len, info: ri, stamp: st})
		p += int64(ri.Len)
	}
	if p != end {
		return fr, nil, fmt.Sprintf("frame body has %d bytes after its %d records", end-p, fh.Count)
	}
	return fr, recs, ""
}

// validFrameAfter reports whether any fully valid frame starts at or after
// from. It decides between a torn tail (nothing valid follows) and damage
// inside the log.
func validFrameAfter(buf []byte, from int64) bool {
	for from < int64(len(buf)) {
		i := bytes.Index(buf[from:], frameMagic)
		if i < 0 {
			return false
		}
		at := from + int64(i)
		if _, _, reason := parseFrame(buf, at); reason == "" {
			return true
		}
		from = at + 1
	}
	return false
}

// maxIndexAfter returns the highest index in valid frames starting at or
// after from (0 when none): what a repair cut at from removes from this file.
func maxIndexAfter(buf []byte, from int64) uint64 {
	var hi uint64
	for from < int64(len(buf)) {
		i := bytes.Index(buf[from:], frameMagic)
		if i < 0 {
			break
		}
		at := from + int64(i)
		fr, recs, reason := parseFrame(buf, at)
		if reason != "" {
			from = at + 1
			continue
		}
		if n := len(recs); n > 0 {
			hi = max(hi, recs[n-1].info.Index)
		}
		from = fr.end
	}
	return hi
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
