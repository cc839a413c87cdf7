package fsm

import (
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// A snapshot's job records are read in three stages (readJobs):
//
//   - the reader (the caller's goroutine) frames the records and feeds
//     their bytes to the stream's CRC, one Write per chunk of records;
//   - decoders (GOMAXPROCS goroutines, at most maxDecoders) decode a
//     chunk's records, check each record alone (checkJob and the
//     version's rules: checkRecord) and compute each job's hash
//     (jobSum), the costly part;
//   - the applier (one goroutine) takes the chunks in stream order and
//     hands their records to the sink in order, as the sequential reader
//     did: the order rule, then the sink (the state's indexes).
//
// Whatever the number of decoders, the sink sees the same records in the
// same order with the same hashes, so the state restored, its digest and
// the error of a refused stream are those of a sequential read: a
// record's own error, or its sink's, is reported only if every record
// before it passed, and a framing error (truncation, a bad length, the
// reader's own error) only if every record before it passed too. Nothing
// is left running on any return. With GOMAXPROCS 1 the reader decodes
// and applies each chunk itself, once read: the same code, no goroutine.

// A chunk closes once it holds chunkRecords records or chunkBytes bytes
// (variables: tests make chunks small).
var (
	chunkRecords = 512
	chunkBytes   = 256 << 10
)

// maxDecoders bounds the decoders: with 1M jobs of 256 B payloads a
// record's decoding and hashing cost about three times its apply, so more
// than a few decoders only wait for the applier.
const maxDecoders = 8

// decoders, when not 0, is the number of decoders instead of GOMAXPROCS
// (tests: 1 is the sequential read their results are compared with).
var decoders int

// jobChunk is a run of consecutive job records.
type jobChunk struct {
	// buf holds the stream's bytes the chunk spans, checksummed when it
	// is sent: each record's length, body and the next record's tag.
	buf   []byte
	spans []span    // the records' bodies in buf
	first uint64    // the first record's position among the stream's job records
	recs  []decoded // the decoder's: one per span, up to the first that fails
	pval  any       // a decoder's panic, re-raised on the caller's goroutine
	done  chan struct{}
}

type span struct{ from, to int }

// decoded is one record as a decoder leaves it for the applier.
type decoded struct {
	j   *job
	cls class // the record's class (j.cls points here until the sink interns it)
	sum [4]uint64
	// err: the record's error before the order rule (decoding,
	// checkJob); post: after it (checkRecord).
	err, post error
}

// pipe runs one run of job records through the decoders and the applier.
type pipe struct {
	st      *state
	sink    jobSink
	version uint16
	seq     uint64 // st.seq and st.index, read by the decoders (st is the applier's)
	index   uint64

	work, order chan *jobChunk
	free        chan *jobChunk
	wg          sync.WaitGroup
	failed      atomic.Bool // the applier stopped: the reader stops too
	closed      bool
	rb          rawBytes
	// inline: no goroutine, the reader decodes and applies each chunk
	// once read (GOMAXPROCS 1, where goroutines could not run in
	// parallel); hbuf is its jobSum buffer.
	inline bool
	hbuf   []byte

	// The applier's, read by the reader once wg is done.
	count  uint64
	lastID string
	err    error
	pval   any
}

// errStopped ends the reader's loop once the applier failed; finish
// returns the applier's error instead.
var errStopped = errors.New("fsm: restore stopped")

// readJobs reads the run of job records after a 'J' tag (read) and hands
// them to sink in order; count and lastID carry the job records before
// and after the run. It returns the tag that ends the run, read and
// checksummed as any other byte of the stream.
func readJobs(cr *crcReader, st *state, sink jobSink, version uint16, count *uint64, lastID *string) (tag byte, err error) {
	p := &pipe{st: st, sink: sink, version: version, seq: st.seq, index: st.index, count: *count, lastID: *lastID}
	workers := min(runtime.GOMAXPROCS(0), maxDecoders)
	if decoders != 0 {
		workers = decoders
	}
	p.free = make(chan *jobChunk, 2*workers+4)
	if p.inline = workers <= 1; !p.inline {
		p.work = make(chan *jobChunk, workers)
		p.order = make(chan *jobChunk, 2*workers+2)
		p.wg.Add(workers + 1)
		for range workers {
			go p.decoder()
		}
		go p.applier()
	}
	defer func() {
		// An earlier record's error comes before the reader's.
		if perr := p.finish(); perr != nil {
			tag, err = 0, perr
		}
		*count, *lastID = p.count, p.lastID
	}()
	return p.read(cr)
}

// finish stops the decoders and the applier, waits for them, and returns
// the applier's error (re-raising a decoder's or the applier's panic).
func (p *pipe) finish() error {
	if !p.closed && !p.inline {
		p.closed = true
		close(p.work)
		close(p.order)
	}
	p.wg.Wait()
	if p.pval != nil {
		panic(p.pval)
	}
	return p.err
}

// read frames records (each after its 'J' tag) until a tag that is not
// 'J' or an error.
func (p *pipe) read(cr *crcReader) (byte, error) {
	c := p.chunk(p.count)
	next := p.count
	p.rb.cr = cr
	for {
		p.rb.buf = &c.buf
		n, err := cr.rawUvarint(&p.rb)
		if err != nil {
			p.send(c)
			return 0, err
		}
		if n > maxRecord {
			p.send(c)
			return 0, corrupt("job record of %d bytes", n)
		}
		from := len(c.buf)
		c.buf = slices.Grow(c.buf, int(n))[:from+int(n)]
		if err := cr.readRaw(c.buf[from:]); err != nil {
			c.buf = c.buf[:from]
			p.send(c)
			return 0, err
		}
		c.spans = append(c.spans, span{from, len(c.buf)})
		next++
		tag, err := cr.rawByte()
		if err != nil {
			p.send(c)
			return 0, err
		}
		if tag != 'J' {
			p.send(c)
			cr.crc.Write([]byte{tag})
			return tag, nil
		}
		c.buf = append(c.buf, tag)
		if len(c.spans) >= chunkRecords || len(c.buf) >= chunkBytes {
			p.send(c)
			if p.failed.Load() {
				return 0, errStopped
			}
			c = p.chunk(next)
		}
	}
}

// chunk returns an empty chunk (a recycled one if any) whose first record
// is the stream's job record first.
func (p *pipe) chunk(first uint64) *jobChunk {
	var c *jobChunk
	select {
	case c = <-p.free:
	default:
		c = &jobChunk{} // buf grows as it fills (a small stream needs little)
	}
	c.buf, c.spans, c.first, c.pval = c.buf[:0], c.spans[:0], first, nil
	if !p.inline {
		c.done = make(chan struct{})
	}
	return c
}

// send checksums c's bytes and hands c to the decoders and the applier.
func (p *pipe) send(c *jobChunk) {
	p.rb.cr.crc.Write(c.buf)
	if p.inline {
		p.hbuf = p.decode(c, p.hbuf)
		p.take(c)
		return
	}
	p.work <- c
	p.order <- c
}

func (p *pipe) decoder() {
	defer p.wg.Done()
	var buf []byte
	for c := range p.work {
		buf = p.decode(c, buf)
		close(c.done)
	}
}

// decode decodes and checks c's records and hashes each, up to the first
// that fails; buf is the encoding buffer of jobSum, returned for reuse.
func (p *pipe) decode(c *jobChunk, buf []byte) []byte {
	defer func() {
		if v := recover(); v != nil {
			c.pval = v
			c.recs = c.recs[:len(c.recs)-1] // the record it panicked on
		}
	}()
	c.recs = slices.Grow(c.recs[:0], len(c.spans))
	for i, sp := range c.spans {
		c.recs = append(c.recs, decoded{})
		r := &c.recs[i]
		d := decoder{b: c.buf[sp.from:sp.to]}
		j := decodeJobIn(&d, &r.cls)
		d.end()
		if d.err != nil {
			r.err = corrupt("job record %d: %v", c.first+uint64(i), d.err)
			break
		}
		r.j = j
		if why := checkJob(j); why != "" {
			r.err = corrupt("job %q: %s", j.id, why)
			break
		}
		if r.post = checkRecord(j, p.version, p.seq, p.index); r.post != nil {
			break
		}
		r.sum, buf = jobSum(buf, j)
	}
	return buf
}

func (p *pipe) applier() {
	defer p.wg.Done()
	for c := range p.order {
		<-c.done
		p.take(c)
	}
}

// take applies c's records unless an earlier one failed, and recycles c.
func (p *pipe) take(c *jobChunk) {
	if p.err == nil {
		p.apply(c) // the records before a decoder's panic, if any
		if c.pval != nil && p.err == nil {
			p.pval, p.err = c.pval, errStopped
		}
		if p.err != nil {
			p.failed.Store(true)
		}
	}
	clear(c.recs) // no job stays reachable from a recycled chunk
	select {
	case p.free <- c:
	default:
	}
}

// apply hands c's records to the sink in order, up to the first error
// (p.err), as the sequential reader did.
func (p *pipe) apply(c *jobChunk) {
	defer func() {
		if v := recover(); v != nil && p.err == nil {
			p.pval, p.err = v, errStopped
		}
	}()
	for i := range c.recs {
		r := &c.recs[i]
		if r.err != nil {
			p.err = r.err
			return
		}
		j := r.j
		if p.count > 0 && j.id <= p.lastID {
			p.err = corrupt("job %q out of order", j.id)
			return
		}
		if r.post != nil {
			p.err = r.post
			return
		}
		if err := p.sink.job(p.st, j, r.sum); err != nil {
			p.err = err
			return
		}
		p.lastID = j.id
		p.count++
	}
}

// checkRecord checks a job record (which passed checkJob) against the
// snapshot: its sequence and lease tokens, and what its version may hold.
func checkRecord(j *job, version uint16, seq, index uint64) error {
	if j.seq == 0 || j.seq > seq || (j.lease != nil && j.lease.token > index) || (j.end != nil && j.end.token > index) {
		return corrupt("job %q: seq or lease token beyond the snapshot", j.id)
	}
	if version == snapV1 && j.end != nil {
		return corrupt("job %q: version 1 record with a last lease end", j.id)
	}
	if version < snapV5 && j.end != nil && j.end.sum != 0 {
		return corrupt("job %q: version %d record with a request sum", j.id, version)
	}
	if version < snapVersion && (j.dep() != nil || j.state == StateWaiting) {
		return corrupt("job %q: version %d record with dependencies", j.id, version)
	}
	if version < snapV3 && j.lease != nil && j.lease.claim != "" {
		return corrupt("job %q: version %d record with a claim id", j.id, version)
	}
	if version < snapVersion && j.uniq() != nil {
		return corrupt("job %q: version %d record with a unique key", j.id, version)
	}
	return nil
}

// rawBytes reads bytes for a uvarint without checksumming them, appending
// them to *buf (the chunk's bytes, checksummed when it is sent).
type rawBytes struct {
	cr  *crcReader
	buf *[]byte
}

func (r *rawBytes) ReadByte() (byte, error) {
	b, err := r.cr.rawByte()
	if err == nil {
		*r.buf = append(*r.buf, b)
	}
	return b, err
}

// rawUvarint is readUvarint of bytes not checksummed (rawBytes).
func (c *crcReader) rawUvarint(r *rawBytes) (uint64, error) {
	v, err := binary.ReadUvarint(r)
	if err != nil && !IsCorrupt(err) && err != c.ioErr {
		return 0, corrupt("bad uvarint at byte %d: %v", c.n, err)
	}
	return v, err
}
