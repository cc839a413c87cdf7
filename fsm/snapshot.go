package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/tidwall/btree"
)

// Snapshot stream format, version 6 (integers little endian unless noted):
//
//	+----------------------+---------------+-------------+-----------+
//	| magic "JRFSMSNP" (8) | version (u16) | index (u64) | seq (u64) |
//	+----------------------+---------------+-------------+-----------+
//	| log clock (32): now, term, stamp, office, u64 big endian each  |
//	+----------------------------------------------------------------+
//	| records, each: tag (1 byte) + body                             |
//	|   'Q' paused queue:  name (str)          (in name order)       |
//	|   'S' schedule:      length (uvarint) + schedule record        |
//	|                      (schedule_codec.go; in ID order)          |
//	|   'L' queue limits:  length (uvarint) + limits (limit.go,      |
//	|                      appendLimit)  (in queue order, after 'Q') |
//	|   'J' job:           length (uvarint) + job record (record.go) |
//	|                      (in ID order, strictly increasing)        |
//	|   'B' batch:         length (uvarint) + batch record           |
//	|                      (batch_group.go; after the jobs, in ID    |
//	|                      order, strictly increasing)               |
//	+----------------------------------------------------------------+
//	| 'E' end: job count (uvarint) | state digest Sum (32 bytes)     |
//	+----------------------------------------------------------------+
//	| CRC-32C (u32) of every byte above                              |
//	+----------------------------------------------------------------+
//
// Nothing may follow the CRC. Restore rebuilds every index from the
// records, recomputes the digest and requires it to equal the stored one.
//
// Version 5 is the same layout without 'S', 'L' and 'B' records and job
// record flags 32 and 64 (schedules, schedule_codec.go; dependencies and
// batches, deps.go; a unique key, unique.go): Restore still reads it,
// with no schedule, no limits, no batch, no job depending on another and
// no unique job.
// Version 4 is the same layout without job record flag 16 (the request
// sum of a lease end by nak or term, record.go): Restore still reads it,
// and its naks' and terms' ends have no sum (a repeat of one is refused
// stale: it cannot be shown to be the same request; an ack's repeat is
// compared with the job's result, as always). Until those jobs' next lease
// ends, a member restored from a version 4 snapshot holds other records
// (and digests) than one that applied the same entries: no mixed-version
// clusters.
// Version 1 is the same layout without job record flag 4 (how the last
// lease ended, record.go): Restore still reads it, and its jobs have no
// LastLease (a repeated ack of a job restored from it is refused stale).
// Version 2 is the layout without record flag 8 (a lease's claim ID);
// Restore reads it too. Version 3 is the layout without the log clock
// (clock.go) and with the digest without it: Restore reads it with a zero
// clock, which the first entry applied after it starts (so a member
// restored from one may hold another log time than one that applied the
// same entries, until the next term: no mixed-version clusters). Older
// builds do not read version 6.
const (
	snapMagic   = "JRFSMSNP"
	snapVersion = 6
	snapV5      = 5
	snapV4      = 4
	snapV3      = 3
	snapV2      = 2
	snapV1      = 1
	// maxRecord bounds one job record: caps on payload and result plus the
	// other fields' caps with room to spare.
	maxRecord = MaxPayload + MaxResult + 64<<10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshot is a frozen copy: the job tree is a copy-on-write clone, so
// Persist reads it while Apply keeps writing the live tree.
type snapshot struct {
	index, seq uint64
	clock      logClock
	sum        [32]byte
	paused     []string
	limits     []qlimit
	jobs       *btree.BTreeG[idEnt] // slots of generations before the live one: frozen
	groups     *groupTree           // batches (immutable records), nil: none
	scheds     *btree.BTreeG[*schedEnt]
}

var _ Snapshot = (*snapshot)(nil)

// Snapshot captures the state as of the last applied entry: O(paused queues), no job is copied.
func (m *Jobs) Snapshot() (Snapshot, error) {
	m.mu.Lock() // Copy marks the live tree's nodes shared: a write.
	defer m.mu.Unlock()
	st := m.st
	st.freeze() // every slot the copy shares is now frozen (state.go)
	sn := &snapshot{index: st.index, seq: st.seq, clock: st.clock, sum: st.sum(), paused: st.pausedNames(), limits: st.copyLimits(), jobs: st.jobs.Copy(), scheds: st.schedCopy()}
	if st.dep.groups != nil {
		sn.groups = st.dep.groups.Copy()
	}
	return sn, nil
}

// Release implements Snapshot.
func (sn *snapshot) Release() { sn.jobs = nil }

// Persist implements Snapshot.
func (sn *snapshot) Persist(w io.Writer) error {
	if sn.jobs == nil {
		return errors.New("fsm: persist of a released snapshot")
	}
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	var b []byte
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint16(b, snapVersion)
	b = binary.LittleEndian.AppendUint64(b, sn.index)
	b = binary.LittleEndian.AppendUint64(b, sn.seq)
	b = sn.clock.append(b)
	for _, name := range sn.paused {
		b = append(b, 'Q')
		b = appendStr(b, name)
	}
	b = appendSchedRecords(b, sn.scheds)
	for i := range sn.limits {
		b = append(b, 'L')
		b = appendBytes(b, appendLimit(nil, &sn.limits[i]))
	}
	if _, err := bw.Write(b); err != nil {
		return err
	}
	var werr error
	rec := make([]byte, 0, 4096)
	sn.jobs.Scan(func(e idEnt) bool {
		rec = appendJob(rec[:0], e.sl.j, true)
		b = append(b[:0], 'J')
		b = binary.AppendUvarint(b, uint64(len(rec)))
		if _, werr = bw.Write(b); werr == nil {
			_, werr = bw.Write(rec)
		}
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	if sn.groups != nil {
		sn.groups.Scan(func(g *group) bool {
			rec = appendGroup(rec[:0], g, true)
			b = append(b[:0], 'B')
			b = binary.AppendUvarint(b, uint64(len(rec)))
			if _, werr = bw.Write(b); werr == nil {
				_, werr = bw.Write(rec)
			}
			return werr == nil
		})
		if werr != nil {
			return werr
		}
	}
	b = append(b[:0], 'E')
	b = binary.AppendUvarint(b, uint64(sn.jobs.Len()))
	b = append(b, sn.sum[:]...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Restore replaces the whole state. It reads the whole stream into a new
// state, validating layout, checksum, record invariants and the digest,
// and swaps it in only if everything holds. Errors wrap ErrCorruptSnapshot
// or ErrSnapshotVersion (or are the reader's own error).
func (m *Jobs) Restore(r io.Reader) error {
	st, err := readSnapshot(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.st = st
	m.mu.Unlock()
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptSnapshot}, args...)...)
}

// crcReader feeds everything read through it to a CRC.
type crcReader struct {
	r     *bufio.Reader
	crc   hash.Hash32
	n     int64
	ioErr error // the underlying reader's last error
}

func (c *crcReader) read(p []byte) error {
	if err := c.readRaw(p); err != nil {
		return err
	}
	c.crc.Write(p)
	return nil
}

// readRaw is read without the CRC: the caller feeds the bytes to it
// later, in stream order (readJobs).
func (c *crcReader) readRaw(p []byte) error {
	if _, err := io.ReadFull(c.r, p); err != nil {
		return c.fail(err)
	}
	c.n += int64(len(p))
	return nil
}

// rawByte is ReadByte without the CRC (see readRaw).
func (c *crcReader) rawByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		return 0, c.fail(err)
	}
	c.n++
	return b, nil
}

// fail is a read's error: the stream's end is a truncation, else the
// reader's own error.
func (c *crcReader) fail(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated at byte %d", c.n)
	}
	c.ioErr = err
	return err
}

func (c *crcReader) ReadByte() (byte, error) {
	var b [1]byte
	err := c.read(b[:])
	return b[0], err
}

func readSnapshot(r io.Reader) (*state, error) { return readStream(r, restoreSink{}) }

// readStream reads and checks a whole snapshot stream, handing each job
// record to sink (snapshot_sink.go: restore keeps the jobs, the verifier
// only checks them).
func readStream(r io.Reader, sink jobSink) (*state, error) {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<20), crc: crc32.New(castagnoli)}
	hdr := make([]byte, 8+2+8+8)
	if err := cr.read(hdr); err != nil {
		return nil, err
	}
	if string(hdr[:8]) != snapMagic {
		return nil, corrupt("bad magic %q", hdr[:8])
	}
	version := binary.LittleEndian.Uint16(hdr[8:])
	if version < snapV1 || version > snapVersion {
		return nil, fmt.Errorf("%w: version %d", ErrSnapshotVersion, version)
	}
	st := newState()
	st.index = binary.LittleEndian.Uint64(hdr[10:])
	st.seq = binary.LittleEndian.Uint64(hdr[18:])
	if version >= snapV4 {
		var b [clockSize]byte
		if err := cr.read(b[:]); err != nil {
			return nil, err
		}
		var ok bool
		if st.clock, ok = decodeClock(b[:]); !ok {
			return nil, corrupt("log clock: office %d after now %d", st.clock.office, st.clock.now)
		}
	}
	var (
		count    uint64
		lastID   string
		lastQ    string
		inJobs   bool
		inLimits bool
		lastB    string
		wantSum  [32]byte
	)
	for {
		tag, err := cr.ReadByte()
		if err != nil {
			return nil, err
		}
		if tag == 'J' {
			if lastB != "" {
				return nil, corrupt("job record after batch records")
			}
			inJobs = true
			// The run of job records (snapshot_load.go), up to the tag after it.
			if tag, err = readJobs(cr, st, sink, version, &count, &lastID); err != nil {
				return nil, err
			}
		}
		switch tag {
		case 'L':
			if err := readLimit(cr, st, version, inJobs); err != nil {
				return nil, err
			}
			inLimits = true
			continue
		case 'Q':
			if inJobs || inLimits {
				return nil, corrupt("queue record after job records")
			}
			name, err := readStr(cr, MaxNameLen)
			if err != nil {
				return nil, err
			}
			if name == "" || (lastQ != "" && name <= lastQ) {
				return nil, corrupt("paused queue %q out of order", name)
			}
			lastQ = name
			st.queueOrCreate(name).paused = true
			continue
		case 'S':
			if inJobs || inLimits || lastB != "" || version < snapVersion {
				return nil, corrupt("schedule record after limits, job or batch records or in a version %d snapshot", version)
			}
			if err := readSchedRecord(cr, st); err != nil {
				return nil, err
			}
			continue
		case 'B':
			if version < snapVersion {
				return nil, corrupt("batch record in a version %d snapshot", version)
			}
			inJobs = true
			g, err := readGroup(cr, st, lastB)
			if err != nil {
				return nil, err
			}
			lastB = g.id
			continue
		case 'E':
		default:
			return nil, corrupt("unknown record tag %#x at byte %d", tag, cr.n-1)
		}
		break
	}
	n, err := readUvarint(cr)
	if err != nil {
		return nil, err
	}
	if n != count {
		return nil, corrupt("end record counts %d jobs, read %d", n, count)
	}
	if err := cr.read(wantSum[:]); err != nil {
		return nil, err
	}
	want := cr.crc.Sum32()
	var tail [4]byte
	if err := cr.read(tail[:]); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint32(tail[:]); got != want {
		return nil, corrupt("checksum %08x, computed %08x", got, want)
	}
	if _, err := cr.r.ReadByte(); err != io.EOF {
		if err != nil {
			return nil, err
		}
		return nil, corrupt("data after the checksum")
	}
	if err := sink.end(st, version); err != nil {
		return nil, err
	}
	if st.digest(version >= snapV4) != wantSum {
		return nil, corrupt("restored state digest differs from the snapshot's")
	}
	return st, nil
}

// readLimit reads one 'L' record into st: only in version 6, before the
// job records, in queue order.
func readLimit(cr *crcReader, st *state, version uint16, inJobs bool) error {
	if version < snapVersion || inJobs {
		return corrupt("limits record in version %d or after job records", version)
	}
	n, err := readUvarint(cr)
	if err != nil {
		return err
	}
	if n > 1<<20 {
		return corrupt("limits record of %d bytes", n)
	}
	b := make([]byte, n)
	if err := cr.read(b); err != nil {
		return err
	}
	d := decoder{b: b}
	l, why := decodeLimit(&d)
	if why == "" {
		if d.end(); d.err != nil {
			why = d.err.Error()
		}
	}
	if why != "" {
		return corrupt("limits record: %s", why)
	}
	if last, ok := st.limits.Max(); ok && l.queue <= last.queue {
		return corrupt("limits of queue %q out of order", l.queue)
	}
	st.limits.Set(l)
	return nil
}

func readStr(cr *crcReader, max int) (string, error) {
	n, err := readUvarint(cr)
	if err != nil {
		return "", err
	}
	if n > uint64(max) {
		return "", corrupt("string of %d bytes", n)
	}
	b := make([]byte, n)
	if err := cr.read(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// readUvarint reads a uvarint, reporting a malformed one as corruption
// (errors of the underlying reader pass through).
func readUvarint(cr *crcReader) (uint64, error) {
	v, err := binary.ReadUvarint(cr)
	if err != nil && !IsCorrupt(err) && err != cr.ioErr {
		return 0, corrupt("bad uvarint at byte %d: %v", cr.n, err)
	}
	return v, err
}

// readGroup reads one 'B' record's body into st (after the batch named
// last, in ID order).
func readGroup(cr *crcReader, st *state, last string) (*group, error) {
	n, err := readUvarint(cr)
	if err != nil {
		return nil, err
	}
	if n > maxRecord {
		return nil, corrupt("batch record of %d bytes", n)
	}
	rec := make([]byte, n)
	if err := cr.read(rec); err != nil {
		return nil, err
	}
	d := decoder{b: rec}
	g := decodeGroup(&d)
	d.end()
	if d.err != nil {
		return nil, corrupt("batch record after %q: %v", last, d.err)
	}
	if last != "" && g.id <= last {
		return nil, corrupt("batch %q out of order", g.id)
	}
	if why := checkGroup(g, st); why != "" {
		return nil, corrupt("batch %q: %s", g.id, why)
	}
	st.setGroup(nil, g)
	return g, nil
}
