package segment

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/vfs"
)

// Reader reads a log directory without changing anything in it: no lock, no
// torn-tail cut, no repair, no stable store. It is what walcompare uses to
// inspect a member's data dir, running or stopped.
//
// Unlike Open it does not refuse a damaged log: it reports every record it
// can attribute to an index, flagging those that fail their own checksum,
// and keeps reading after the damage. Memory is bounded by one segment file.
//
// A Reader is not safe for concurrent use. It sees the files as they are
// when each segment is read; a log being written concurrently may show a
// torn tail, which is reported as such and not as damage.
type Reader struct {
	dir   string
	segs  []roSegment
	floor uint64
	notes []string
	torn  *TornTail
	buf   []byte // reused for each segment file
}

// roSegment is one segment file as seen by its header.
type roSegment struct {
	name string
	hdr  segHeader
	// limit is the highest index this segment may contribute: later
	// segments whose base is at or below it truncated the rest.
	limit uint64
}

// TornTail is where the last segment stops being valid with nothing valid
// after it: the unacknowledged tail of a crashed write, which Open would cut.
type TornTail struct {
	Segment string
	Offset  int64
	Reason  string
}

// Record is one entry as stored, with what its checks found. It never holds
// the payload bytes.
type Record struct {
	Index uint64
	Term  uint64
	Type  raft.LogType
	// DataLen and DataCRC describe the stored data (CRC32C, computed).
	DataLen uint32
	DataCRC uint32
	// Stamped says whether the record carries a payload stamp; Stamp is it.
	Stamped bool
	Stamp   StampInfo
	// Corrupt: the record fails its own checksum (its header CRC, or a
	// non-empty body that does not match its stamp), or could not be read
	// at all (then only Index is known). An empty body under a non-empty
	// stamp is not Corrupt: it is a lost payload, visible as DataLen 0 and
	// Stamp.Len > 0.
	Corrupt bool
	// Segment and Offset locate the record (or the damage) on disk.
	Segment string
	Offset  int64
	// Detail says what failed when Corrupt.
	Detail string
}

// Lost reports whether r has an empty body under a non-empty stamp.
func (r *Record) Lost() bool {
	return !r.Corrupt && r.DataLen == 0 && r.Stamped && r.Stamp.Len > 0
}

// ReadOnly prepares to read the log in dir. It reads the segment headers
// only; Scan reads the records. It fails when dir cannot be listed or holds
// no segment file.
func ReadOnly(dir string) (*Reader, error) {
	names, seqs, err := segmentFiles(vfs.OSFS{}, dir)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("wal: %s holds no segment files", dir)
	}
	r := &Reader{dir: dir}
	for i, n := range names {
		h, err := readSegHeader(filepath.Join(dir, n))
		if err != nil {
			torn, rerr := r.tornCreation(n, i == len(names)-1)
			if rerr != nil {
				return nil, rerr
			}
			if torn {
				// A torn creation, as Open sees it: the last segment,
				// nothing framed after its header.
				r.torn = &TornTail{Segment: n, Reason: "segment header: " + err.Error()}
			} else {
				r.notes = append(r.notes, fmt.Sprintf("%s: unreadable segment header, segment skipped: %v", n, err))
			}
			continue
		}
		if h.Seq != seqs[i] {
			r.notes = append(r.notes, fmt.Sprintf("%s: header sequence %d differs from file name", n, h.Seq))
		}
		r.floor = max(r.floor, h.Floor)
		if h.Flags&segFlagReset != 0 {
			r.segs = r.segs[:0] // a reset supersedes every earlier segment
		}
		r.segs = append(r.segs, roSegment{name: n, hdr: h, limit: ^uint64(0)})
	}
	// A segment based at b truncates everything at or above b before it.
	for i := len(r.segs) - 1; i > 0; i-- {
		b := r.segs[i].hdr.Base
		for j := 0; j < i && b != 0; j++ {
			r.segs[j].limit = min(r.segs[j].limit, b-1)
		}
	}
	return r, nil
}

// tornCreation reports whether the segment name, whose header fails, is a
// torn creation as Open sees it (tornAt): the last segment, nothing framed
// after its header.
func (r *Reader) tornCreation(name string, last bool) (bool, error) {
	if !last {
		return false, nil
	}
	buf, err := r.read(name)
	if err != nil {
		return false, fmt.Errorf("wal: read segment %s: %w", name, err)
	}
	return len(buf) < segHeaderSize || nextFramed(buf, 0, formatVersion) < 0, nil
}

func readSegHeader(path string) (segHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return segHeader{}, err
	}
	defer f.Close()
	b := make([]byte, segHeaderSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return segHeader{}, fmt.Errorf("segment header: %w", err)
	}
	return decodeSegHeader(b)
}

// Floor returns the highest commit floor persisted in segment headers and,
// once Scan has read them, in frames. A floor is only ever an index that was
// committed.
func (r *Reader) Floor() uint64 { return r.floor }

// Torn returns the torn tail Scan (or ReadOnly) found, nil if none.
func (r *Reader) Torn() *TornTail { return r.torn }

// Notes returns damage that could not be attributed to an index (an
// unreadable segment header, records that repeat an earlier index).
func (r *Reader) Notes() []string { return r.notes }

// Scan calls fn with every record with index in [from, to] (to 0 means no
// upper bound) in ascending index order, as replay would see the log, plus
// a Corrupt record (only Index, Segment, Offset and Detail set) for every
// index inside the log that damage made unreadable. It reads every segment,
// so Floor covers every frame afterwards. fn must not keep rec. Scan stops
// when fn returns false. Only IO errors are returned.
func (r *Reader) Scan(from, to uint64, fn func(rec *Record) bool) error {
	if to == 0 {
		to = ^uint64(0)
	}
	sc := &readScan{r: r, from: from, to: to, fn: fn}
	for si, s := range r.segs {
		if s.hdr.Flags&segFlagReset != 0 {
			sc.last = 0
		}
		if s.hdr.Base != 0 && sc.last >= s.hdr.Base {
			sc.last = s.hdr.Base - 1
		}
		if sc.last != 0 && s.hdr.Base > sc.last+1 {
			sc.damage(s.name, 0, fmt.Sprintf("segment base %d leaves a gap after index %d", s.hdr.Base, sc.last))
			if !sc.gap(s.hdr.Base - 1) {
				return nil
			}
		}
		if sc.last == 0 && s.hdr.Base > 1 {
			sc.last = s.hdr.Base - 1 // where this segment says the log continues
		}
		buf, err := r.read(s.name)
		if err != nil {
			return fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		if !sc.segment(s, buf, si == len(r.segs)-1) {
			return nil
		}
	}
	return nil
}

// read reads a whole segment file into the reader's buffer.
func (r *Reader) read(name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(r.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := int(st.Size())
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	buf := r.buf[:n]
	k, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF {
		err = nil // shrank while we read: a torn tail in the making
	}
	return buf[:k], err
}

// readScan is the state of one Scan.
type readScan struct {
	r        *Reader
	from, to uint64
	fn       func(*Record) bool
	stopped  bool
	last     uint64 // last index of the log so far, 0 before the first
	rec      Record
	// where and why the log was last found damaged, for the Corrupt
	// records of the indexes it swallowed
	dSeg    string
	dOff    int64
	dReason string
}

// maxGapRecords bounds the Corrupt records one gap may produce.
const maxGapRecords = 1 << 20

func (sc *readScan) damage(seg string, off int64, reason string) {
	sc.dSeg, sc.dOff, sc.dReason = seg, off, reason
}

func (sc *readScan) emit(rec *Record) bool {
	sc.last = rec.Index
	if sc.stopped || rec.Index < sc.from || rec.Index > sc.to {
		return true
	}
	if !sc.fn(rec) {
		sc.stopped = true
		return false
	}
	return true
}

// gap emits Corrupt records for the indexes after last up to hi, blamed on
// the last damage seen.
func (sc *readScan) gap(hi uint64) bool {
	if sc.last == 0 {
		return true // unattributable: where the log starts is unknown
	}
	if end := hi; hi-sc.last > maxGapRecords {
		// More indexes than damage could ever have swallowed (a crafted
		// or wildly damaged index): report the first ones, note the rest.
		hi = sc.last + maxGapRecords
		defer func() {
			sc.r.notes = append(sc.r.notes, fmt.Sprintf("%s@%d: a jump to index %d after %d cannot all be damage (%s); indexes past %d not reported",
				sc.dSeg, sc.dOff, end+1, hi-maxGapRecords, sc.dReason, hi))
			sc.last = end
		}()
	}
	for ix := sc.last + 1; ix <= hi; ix++ {
		if ix > sc.to {
			sc.last = hi
			return true
		}
		if !sc.emit(&Record{Index: ix, Corrupt: true, Segment: sc.dSeg, Offset: sc.dOff, Detail: sc.dReason}) {
			return false
		}
	}
	return true
}

// segment emits the records of one segment file with the Reader's policy
// over the frame parser (frames.go): a frame that is not valid is a torn
// tail where Open would cut one (tornAt, in the last segment), otherwise
// its records are reported one by one, flagged, and the scan goes on after
// it. It returns false when fn stopped the scan.
func (sc *readScan) segment(s roSegment, buf []byte, isLast bool) bool {
	r := sc.r
	size := int64(len(buf))
	off := int64(segHeaderSize)
	for off < size {
		fr := parseFrameAt(buf, off, s.hdr.Version)
		if !fr.valid() && allZero(buf[off:]) {
			return true // preallocated space: no more frames
		}
		if !fr.valid() && isLast && tornAt(buf, off, s.hdr.Version) {
			r.torn = &TornTail{Segment: s.name, Offset: off, Reason: fr.reason}
			return true
		}
		if fr.end == 0 {
			// The frame itself is unreadable: the indexes it swallowed
			// show up as a gap before the next framed frame's records.
			sc.damage(s.name, off, fr.reason)
			next := nextFramed(buf, off+1, s.hdr.Version)
			if next < 0 {
				r.notes = append(r.notes, fmt.Sprintf("%s@%d: %s (rest of the segment unreadable)", s.name, off, fr.reason))
				return true
			}
			r.notes = append(r.notes, fmt.Sprintf("%s@%d: %s (frame skipped)", s.name, off, fr.reason))
			off = next
			continue
		}
		r.floor = max(r.floor, fr.hdr.Floor)
		if !sc.records(s, fr) {
			return false
		}
		off = fr.end
	}
	return true
}

// records emits the records of one frame whose header was read.
func (sc *readScan) records(s roSegment, fr frameScan) bool {
	r := sc.r
	flagged := false
	for i := range fr.recs {
		rs := &fr.recs[i]
		ri := rs.info
		if ri.Index > s.limit {
			continue // truncated by a later segment
		}
		if sc.last != 0 && ri.Index <= sc.last {
			r.notes = append(r.notes, fmt.Sprintf("%s@%d: index %d repeats (log at %d), skipped", s.name, rs.off, ri.Index, sc.last))
			flagged = true
			continue
		}
		if sc.last != 0 && ri.Index > sc.last+1 {
			if sc.dReason == "" {
				sc.damage(s.name, rs.off, fmt.Sprintf("index %d follows %d", ri.Index, sc.last))
			}
			if !sc.gap(ri.Index - 1) {
				return false
			}
			flagged = true
		}
		sc.dSeg, sc.dOff, sc.dReason = "", 0, ""
		rec := &sc.rec
		*rec = Record{Index: ri.Index, Term: ri.Term, Type: ri.Type, DataLen: rs.dataLen, DataCRC: rs.dataCRC,
			Segment: s.name, Offset: rs.off, Stamp: rs.stamp, Stamped: rs.stamped}
		if rs.problem != "" && !rs.lost {
			rec.Corrupt, rec.Detail = true, rs.problem
		}
		flagged = flagged || rs.problem != ""
		if !sc.emit(rec) {
			return false
		}
	}
	if !fr.framed {
		// The rest of this batch cannot be framed; a batch holds
		// consecutive indexes, so they are still attributable.
		sc.damage(s.name, fr.framingAt, fr.reason)
		rest := uint64(fr.hdr.Count) - uint64(len(fr.recs))
		before := sc.last
		if sc.last != 0 && rest != 0 && !sc.gap(min(sc.last+rest, s.limit)) {
			return false
		}
		if sc.last == before {
			// Nothing to blame it on (where the log starts is unknown,
			// or a later segment truncated those indexes).
			r.notes = append(r.notes, fmt.Sprintf("%s@%d: %s (index unknown)", s.name, fr.framingAt, fr.reason))
		}
		return true
	}
	if !fr.valid() && !flagged {
		// A problem no record shows (a first-index mark, the order of
		// the batch): damage Open refuses, with no index to blame.
		r.notes = append(r.notes, fmt.Sprintf("%s@%d: %s", s.name, fr.off, fr.reason))
	}
	return true
}
