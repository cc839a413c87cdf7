package segment

import (
	"io"
	"os"

	"github.com/jobraft/jobraft/wal/vfs"
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
func scanSegment(fs vfs.FS, path string) (*scanned, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
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

// scanBytes parses a segment held in memory (also the fuzz entry point)
// with Open's policy over the frame parser (frames.go): valid frames up to
// the first other one, which is torn or damage as tornAt says.
func scanBytes(name string, buf []byte) *scanned {
	s := &scanned{name: name, size: int64(len(buf))}
	h, err := decodeSegHeader(buf)
	if err != nil {
		// A header is synced before any frame is written after it, so a
		// damaged header with nothing framed after it is a torn creation
		// (cut short, or zero-filled by a power loss).
		s.bad = &badSpot{off: 0, reason: err.Error(), torn: len(buf) < segHeaderSize || nextFramed(buf, 0, formatVersion) < 0}
		return s
	}
	s.hdr, s.floor = h, h.Floor
	off := int64(segHeaderSize)
	s.end = int64(len(buf))
	for off < int64(len(buf)) {
		fr := parseFrameAt(buf, off, h.Version)
		if !fr.valid() && allZero(buf[off:]) {
			// Zeros to the end of the file: space preallocated for
			// frames not written yet, not damage.
			s.end = off
			return s
		}
		if !fr.valid() {
			s.bad = &badSpot{off: off, reason: fr.reason, torn: tornAt(buf, off, h.Version)}
			if !s.bad.torn {
				s.afterMax = maxIndexAfter(buf, off+1, h.Version)
			}
			return s
		}
		sf := scanFrame{off: fr.off, end: fr.end, first: len(s.recs), cnt: int(fr.hdr.Count), floor: fr.hdr.Floor, firstMark: fr.firstMark}
		for _, r := range fr.recs {
			s.recs = append(s.recs, scanRec{off: r.off, len: r.len, info: r.info, stamp: r.stamp})
		}
		s.frames = append(s.frames, sf)
		s.floor = max(s.floor, sf.floor)
		s.firstMark = max(s.firstMark, sf.firstMark)
		off = fr.end
	}
	return s
}

// maxIndexAfter returns the highest index in framed frames starting at or
// after from (0 when none): what a repair cut at from removes from this file.
func maxIndexAfter(buf []byte, from int64, version uint16) uint64 {
	var hi uint64
	for from < int64(len(buf)) {
		at := nextFramed(buf, from, version)
		if at < 0 {
			break
		}
		fr := parseFrameAt(buf, at, version)
		if n := len(fr.recs); n > 0 {
			hi = max(hi, fr.recs[n-1].info.Index)
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
