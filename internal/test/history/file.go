package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

// FileName is the history file in a member's data dir.
const FileName = "applied.hist"

// A history file is a header and fixed-size records, appended one batch per
// write (little endian):
//
//	header  0  [8]byte "jrapplog"
//	        8  u32     format version (1)
//	       12  u32     CRC32C of bytes [0, 12)
//	record  0  u8      kind (Kind)
//	        1  u8      raft log type (KindApplied)
//	        2  u16     0
//	        4  u32     CRC32C of the entry's Data (KindApplied)
//	        8  u64     index
//	       16  u64     term (KindApplied)
//	       24  u32     0
//	       28  u32     CRC32C of bytes [0, 28)
//
// Only whole, valid records count. A SIGKILL during a write leaves a torn
// last record (partial or failing its checksum): readers ignore it, and
// OpenFile cuts it before appending. A damaged record before the last one
// is corruption (ErrCorrupt).
const (
	fileVersion = 1
	headerSize  = 16
	recordSize  = 32
)

var (
	fileMagic  = []byte("jrapplog")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func encodeHeader() []byte {
	b := make([]byte, headerSize)
	copy(b, fileMagic)
	binary.LittleEndian.PutUint32(b[8:], fileVersion)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

func checkHeader(b []byte) error {
	if !bytes.Equal(b[:8], fileMagic) || binary.LittleEndian.Uint32(b[12:]) != crc32.Checksum(b[:12], castagnoli) {
		return fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != fileVersion {
		return fmt.Errorf("%w: version %d", ErrVersion, v)
	}
	return nil
}

func appendRecord(b []byte, r Record) []byte {
	var rec [recordSize]byte
	rec[0], rec[1] = byte(r.Kind), byte(r.Type)
	binary.LittleEndian.PutUint32(rec[4:], r.CRC)
	binary.LittleEndian.PutUint64(rec[8:], r.Index)
	binary.LittleEndian.PutUint64(rec[16:], r.Term)
	binary.LittleEndian.PutUint32(rec[28:], crc32.Checksum(rec[:28], castagnoli))
	return append(b, rec[:]...)
}

func decodeRecord(b []byte) (Record, error) {
	if binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return Record{}, fmt.Errorf("%w: record checksum", ErrCorrupt)
	}
	if binary.LittleEndian.Uint16(b[2:]) != 0 || binary.LittleEndian.Uint32(b[24:]) != 0 {
		return Record{}, fmt.Errorf("%w: reserved bytes set", ErrCorrupt)
	}
	r := Record{
		Kind: Kind(b[0]), Type: raft.LogType(b[1]),
		CRC: binary.LittleEndian.Uint32(b[4:]), Index: binary.LittleEndian.Uint64(b[8:]), Term: binary.LittleEndian.Uint64(b[16:]),
	}
	return r, r.Validate()
}

// decodeRecords decodes whole records from b. A damaged record is a torn
// write when it is the last whole one and nothing follows it (last), else
// corruption at record number base+i.
func decodeRecords(b []byte, base int, last bool) ([]Record, error) {
	n := len(b) / recordSize
	out := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		r, err := decodeRecord(b[i*recordSize:])
		if err != nil {
			if i == n-1 && last {
				break
			}
			return nil, fmt.Errorf("record %d: %w", base+i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ReadFile returns the records of the history file at path from the n-th
// on; a missing file or one without a whole header holds none.
func ReadFile(path string, n int) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hdr [headerSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil // torn before the header was whole
		}
		return nil, err
	}
	if err := checkHeader(hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, headerSize+int64(n)*recordSize, 1<<62))
	if err != nil {
		return nil, err
	}
	recs, err := decodeRecords(b, n, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// File is a Sink appending to a history file, and a Source reading it. A
// write error ends the recording (a history with a hole would be checked
// wrongly): it is kept (Err) and handed to the onErr of OpenFile.
type File struct {
	name, path string
	onErr      func(error)
	mu         sync.Mutex
	f          *os.File
	buf        []byte
	err        error
}

var (
	_ Sink   = (*File)(nil)
	_ Source = (*File)(nil)
)

// OpenFile opens (creating it and its directory) the history file at path
// for appending, cutting a torn last record left by a killed writer.
// name labels the member. onErr, when not nil, is called (on the writing
// goroutine) with the first write error: a member process should die
// loudly rather than run on with an incomplete history.
func OpenFile(name, path string, onErr func(error)) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := repair(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{name: name, path: path, f: f, onErr: onErr}, nil
}

// repair leaves f holding a header and whole valid records only, its
// offset at the end.
func repair(f *os.File) error {
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if len(b) < headerSize {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt(encodeHeader(), 0); err != nil {
			return err
		}
		_, err := f.Seek(headerSize, io.SeekStart)
		return err
	}
	if err := checkHeader(b); err != nil {
		return err
	}
	recs, err := decodeRecords(b[headerSize:], 0, true)
	if err != nil {
		return err
	}
	end := int64(headerSize + len(recs)*recordSize)
	if end != int64(len(b)) {
		if err := f.Truncate(end); err != nil {
			return err
		}
	}
	_, err = f.Seek(end, io.SeekStart)
	return err
}

// Append implements Sink: one write per call.
func (h *File) Append(recs []Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	h.buf = h.buf[:0]
	for _, r := range recs {
		h.buf = appendRecord(h.buf, r)
	}
	if _, err := h.f.Write(h.buf); err != nil {
		h.err = fmt.Errorf("history: %s: %w", h.path, err)
		if h.onErr != nil {
			h.onErr(h.err)
		}
	}
}

// Err returns the first write error.
func (h *File) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Close closes the file.
func (h *File) Close() error { return h.f.Close() }

// Member implements Source.
func (h *File) Member() string { return h.name }

// Since implements Source.
func (h *File) Since(n int) ([]Record, error) { return ReadFile(h.path, n) }

// FileSource is the Source of a history file written by another process.
func FileSource(name, path string) Source { return fileSource{name, path} }

type fileSource struct{ name, path string }

func (s fileSource) Member() string                { return s.name }
func (s fileSource) Since(n int) ([]Record, error) { return ReadFile(s.path, n) }
