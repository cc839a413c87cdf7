package segment

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/raft"
)

// This file is the one parser of a segment's frames. Open (scan.go) and the
// read-only Reader (reader.go) both read segments through it and apply only
// their own policy on top: Open accepts valid frames and stops at the first
// other one; the Reader reports records one by one and reads past damage.
// Both call a frame that is not valid a torn tail exactly when it is in the
// last segment and no framed frame starts after it (tornAt), so they agree
// on every file about what is torn and what is damage.

// frameScan is what the parser finds in the frame at off.
type frameScan struct {
	off int64
	// end is where the frame ends (0 when its header fails or its body
	// overruns the file).
	end int64
	hdr frameHeader
	// recs are the records decoded, in order: all of them when framed.
	recs []recScan
	// framed: the header verifies, the body fits the file, every record's
	// header and CRC verify and the records fill the body exactly. A
	// frame that is not framed may be a torn write. framingAt is where
	// framing failed (the frame, or a record in it).
	framed    bool
	framingAt int64
	// reason is the frame's first problem in parse order ("" when the
	// frame is valid): a framing failure, or a content problem of a framed
	// frame (a record without a stamp or whose data fails it, an index out
	// of sequence inside the batch, a first-index mark that fails or that
	// the segment's version cannot hold).
	reason string
	// firstMark is a valid first-index mark's index (kind 3), else 0.
	firstMark uint64
}

// valid reports whether Open accepts the frame.
func (f *frameScan) valid() bool { return f.reason == "" }

// recScan is one decoded record and the checks of its data.
type recScan struct {
	off   int64
	len   uint32
	info  recordInfo
	stamp StampInfo
	// stamped: the record carries a stamp; dataLen and dataCRC describe
	// its stored data.
	stamped          bool
	dataLen, dataCRC uint32
	// problem says why the record's data is not what its stamp says (""
	// when it is): no stamp, or data that fails it. lost: the data is
	// empty under a non-empty stamp (a problem too).
	problem string
	lost    bool
}

// parseFrameAt parses and checks the frame at off of a segment of format
// version. It never fails: what it finds is in the result.
func parseFrameAt(buf []byte, off int64, version uint16) frameScan {
	fr := frameScan{off: off, framingAt: off}
	size := int64(len(buf))
	if size-off < frameHeaderSize {
		fr.reason = "frame header cut short"
		return fr
	}
	fh, err := decodeFrameHeader(buf[off : off+frameHeaderSize])
	if err != nil {
		fr.reason = err.Error()
		return fr
	}
	body := off + frameHeaderSize
	end := body + int64(fh.BodyLen)
	if end > size {
		fr.reason = fmt.Sprintf("frame body of %d bytes extends beyond the end of the file", fh.BodyLen)
		return fr
	}
	fr.hdr, fr.end = fh, end
	problem := func(s string) {
		if fr.reason == "" {
			fr.reason = s
		}
	}
	switch fh.Kind {
	case frameFloor:
		fr.framed = true
		return fr
	case frameFirst:
		fr.framed = true
		first, err := decodeFirstMark(buf[body:end])
		switch {
		case err != nil:
			problem(err.Error())
		case version < firstMarkVersion:
			problem(fmt.Sprintf("first-index mark in a format version %d segment", version))
		default:
			fr.firstMark = first
		}
		return fr
	}
	fr.recs = make([]recScan, 0, min(int(fh.Count), int(fh.BodyLen)/recHeaderSize))
	p := body
	var l raft.Log
	framing := func(at int64, s string) frameScan {
		fr.framingAt = at
		problem(s)
		return fr
	}
	for i := uint32(0); i < fh.Count; i++ {
		if end-p < recHeaderSize {
			return framing(p, fmt.Sprintf("record %d of %d cut short", i, fh.Count))
		}
		ri, err := decodeRecordHeader(buf[p : p+recHeaderSize])
		if err != nil {
			return framing(p, err.Error())
		}
		if int64(ri.Len) > end-p {
			return framing(p, fmt.Sprintf("record %d of %d overruns its frame", i, fh.Count))
		}
		if _, err := decodeRecord(buf[p:p+int64(ri.Len)], &l); err != nil {
			return framing(p, fmt.Sprintf("index %d: %v", ri.Index, err))
		}
		rs := recScan{off: p, len: ri.Len, info: ri, dataLen: uint32(len(l.Data)), dataCRC: Checksum(l.Data)}
		rs.stamp, rs.stamped = ParseStamp(l.Extensions)
		switch {
		case !rs.stamped:
			rs.problem = "record carries no stamp"
		case rs.dataLen != rs.stamp.Len || rs.dataCRC != rs.stamp.CRC:
			rs.problem = fmt.Sprintf("data (len %d crc %08x) does not match its stamp (len %d crc %08x)",
				rs.dataLen, rs.dataCRC, rs.stamp.Len, rs.stamp.CRC)
			rs.lost = rs.dataLen == 0 && rs.stamp.Len > 0
		}
		if rs.problem != "" {
			problem(fmt.Sprintf("index %d: %s", ri.Index, rs.problem))
		}
		if i > 0 && ri.Index != fr.recs[i-1].info.Index+1 {
			problem(fmt.Sprintf("index %d follows %d inside one batch", ri.Index, fr.recs[i-1].info.Index))
		}
		fr.recs = append(fr.recs, rs)
		p += int64(ri.Len)
	}
	if p != end {
		return framing(p, fmt.Sprintf("frame body has %d bytes after its %d records", end-p, fh.Count))
	}
	fr.framed = true
	return fr
}

// nextFramed returns the offset of the first framed frame starting at or
// after from, or -1.
func nextFramed(buf []byte, from int64, version uint16) int64 {
	for from < int64(len(buf)) {
		i := bytes.Index(buf[from:], frameMagic)
		if i < 0 {
			return -1
		}
		at := from + int64(i)
		if fr := parseFrameAt(buf, at, version); fr.framed {
			return at
		}
		from = at + 1
	}
	return -1
}

// tornAt reports whether damage at off leaves nothing after it that was
// written: no framed frame starts after off. In the last segment such
// damage is the unacknowledged tail of a crashed write (a batch whose
// fsync never returned, possibly with its records whole and its data not),
// which both Open and the Reader treat as torn; anywhere else, or with a
// framed frame after it, it is damage inside the log.
func tornAt(buf []byte, off int64, version uint16) bool {
	return nextFramed(buf, off+1, version) < 0
}
