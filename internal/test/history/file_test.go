package history

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

func sampleRecords() []Record {
	return []Record{
		{Kind: KindStarted},
		{Kind: KindApplied, Index: 1, Term: 1, Type: raft.LogConfiguration, CRC: 0xdeadbeef},
		{Kind: KindApplied, Index: 2, Term: 1, Type: raft.LogCommand, CRC: 7},
		{Kind: KindRestored, Index: 40},
		{Kind: KindApplied, Index: 41, Term: 3, Type: raft.LogCommand, CRC: 9},
	}
}

func writeSample(t *testing.T) (string, []Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m0", FileName)
	f, err := OpenFile("m0", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := sampleRecords()
	f.Append(recs[:1])
	f.Append(recs[1:3])
	f.Append(recs[3:])
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, recs
}

// Records written in batches read back whole, from any offset.
func TestFileRoundTrip(t *testing.T) {
	path, want := writeSample(t)
	for n := 0; n <= len(want); n++ {
		got, err := ReadFile(path, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want)-n || (len(got) > 0 && !reflect.DeepEqual(got, want[n:])) {
			t.Fatalf("from %d: got %v, want %v", n, got, want[n:])
		}
	}
	if got, err := ReadFile(filepath.Join(t.TempDir(), "none"), 0); err != nil || got != nil {
		t.Fatalf("missing file: %v %v", got, err)
	}
}

// A torn last record (partial, or whole but failing its checksum) is
// ignored by readers and cut by the next writer, which appends after the
// last whole record; damage before the last record is corruption.
func TestFileTornTailAndCorruption(t *testing.T) {
	path, want := writeSample(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() ([]Record, error) { return ReadFile(path, 0) }

	write(append(append([]byte(nil), good...), good[headerSize:headerSize+20]...)) // a partial record
	if got, err := read(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("partial tail: %v %v", got, err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-10] ^= 1 // the last record fails its checksum
	write(flipped)
	if got, err := read(); err != nil || !reflect.DeepEqual(got, want[:len(want)-1]) {
		t.Fatalf("damaged last record: %v %v", got, err)
	}
	f, err := OpenFile("m0", path, nil) // cuts the torn record
	if err != nil {
		t.Fatal(err)
	}
	extra := Record{Kind: KindApplied, Index: 42, Term: 3, Type: raft.LogCommand, CRC: 1}
	f.Append([]Record{extra})
	f.Close()
	if got, err := read(); err != nil || !reflect.DeepEqual(got, append(want[:len(want)-1:len(want)-1], extra)) {
		t.Fatalf("after reopen and append: %v %v", got, err)
	}

	middle := append([]byte(nil), good...)
	middle[headerSize+recordSize+3] ^= 1
	write(middle)
	if _, err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged middle record: %v, want ErrCorrupt", err)
	}
	if _, err := OpenFile("m0", path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenFile over a damaged middle record: %v, want ErrCorrupt", err)
	}
	badHeader := append([]byte(nil), good...)
	badHeader[9] ^= 1
	write(badHeader)
	if _, err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("header checksum: %v, want ErrCorrupt", err)
	}
	versioned := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(versioned[8:], 2)
	binary.LittleEndian.PutUint32(versioned[12:], crc32.Checksum(versioned[:12], castagnoli))
	write(versioned)
	if _, err := read(); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 2: %v, want ErrVersion", err)
	}
	write(good[:headerSize-3]) // killed before the header was whole
	if got, err := read(); err != nil || got != nil {
		t.Fatalf("torn header: %v %v", got, err)
	}
}

// Validate refuses records whose fields do not fit their kind.
func TestRecordValidate(t *testing.T) {
	for _, r := range sampleRecords() {
		if err := r.Validate(); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
	for _, r := range []Record{
		{Kind: 0},
		{Kind: 9, Index: 1},
		{Kind: KindStarted, Index: 3},
		{Kind: KindRestored},
		{Kind: KindRestored, Index: 3, Term: 1},
		{Kind: KindApplied, Index: 0, Term: 1},
		{Kind: KindApplied, Index: 1, Term: 0},
	} {
		if err := r.Validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v: %v, want ErrCorrupt", r, err)
		}
	}
}
