package segment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// A crafted segment whose second record claims an index 2^40 past the first
// (valid checksums) does not make the read-only reader emit 2^40 Corrupt
// records: it reports a bounded number and a note.
func TestReadOnlyBoundsAnImpossibleGap(t *testing.T) {
	dir := t.TempDir()
	buf := segHeader{Version: formatVersion, Seq: 1, Base: 1}.encode()
	for _, ix := range []uint64{1, 1 << 40} {
		e := &raft.Log{Index: ix, Term: 1, Type: raft.LogCommand, Data: []byte("x")}
		Stamp(e)
		frame := make([]byte, frameHeaderSize)
		frame = appendRecord(frame, e)
		frameHeader{Kind: frameBatch, Count: 1, BodyLen: uint32(len(frame) - frameHeaderSize)}.put(frame)
		buf = append(buf, frame...)
	}
	if err := os.WriteFile(filepath.Join(dir, segName(1)), buf, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := r.Scan(0, 0, func(*Record) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n > maxGapRecords+2 || len(r.Notes()) == 0 {
		t.Fatalf("%d records, notes %q", n, r.Notes())
	}
}
