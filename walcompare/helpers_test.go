package walcompare

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// body returns a deterministic payload for (index, term) of n bytes.
func body(ix, term uint64, n int) []byte {
	b := make([]byte, n)
	x := ix*0x9e3779b97f4a7c15 ^ term*0xbf58476d1ce4e5b9 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// entry is a stamped command entry, as a leader proposes it.
func entry(ix, term uint64, n int) *raft.Log {
	l := &raft.Log{Index: ix, Term: term, Type: raft.LogCommand, Data: body(ix, term, n)}
	segment.Stamp(l)
	return l
}

// history returns entries [from, to] with terms from termOf and bodies of n
// bytes.
func history(from, to uint64, n int, termOf func(uint64) uint64) []*raft.Log {
	var out []*raft.Log
	for ix := from; ix <= to; ix++ {
		out = append(out, entry(ix, termOf(ix), n))
	}
	return out
}

// walSpec describes a log directory to build through wal.Open.
type walSpec struct {
	entries []*raft.Log
	floor   uint64 // commit floor bound while writing (persisted per batch)
	batch   int    // entries per StoreLogs (default 1)
	compact uint64 // DeleteRange(first, compact) after writing, if > 0
	opts    []wal.Option
}

// buildWAL writes spec into dir with the real log and closes it.
func buildWAL(t testing.TB, dir string, spec walSpec) {
	t.Helper()
	l, err := wal.Open(dir, spec.opts...)
	if err != nil {
		t.Fatal(err)
	}
	// The floor follows the log up to spec.floor: the guard refuses
	// appends at or below it into an empty log.
	var floor uint64
	l.SetCommitFloor(func() uint64 { return floor })
	batch := max(spec.batch, 1)
	for i := 0; i < len(spec.entries); i += batch {
		if err := l.StoreLogs(spec.entries[i:min(len(spec.entries), i+batch)]); err != nil {
			t.Fatalf("store: %v", err)
		}
		floor = min(spec.floor, spec.entries[min(len(spec.entries), i+batch)-1].Index)
	}
	if spec.compact > 0 {
		first, _ := l.FirstIndex()
		if err := l.DeleteRange(first, spec.compact); err != nil {
			t.Fatalf("compact: %v", err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawSegment encodes a wal segment file byte by byte, following the layout
// drawn in wal/segment/format.go. Tests use it for members the guard would refuse to
// write (a lost payload). Every frame holds the given entries as stored:
// their Extensions (stamp included) and Data exactly as given; an empty
// frame is written as a floor mark.
func rawSegment(seq, base, floor uint64, frames [][]*raft.Log) []byte {
	h := make([]byte, 48)
	copy(h, "JRWALSEG")
	binary.LittleEndian.PutUint16(h[8:], 1)
	binary.LittleEndian.PutUint64(h[16:], seq)
	binary.LittleEndian.PutUint64(h[24:], base)
	binary.LittleEndian.PutUint64(h[32:], floor)
	binary.LittleEndian.PutUint32(h[44:], segment.Checksum(h[:44]))
	out := h
	for _, fr := range frames {
		var recs []byte
		for _, l := range fr {
			r := make([]byte, 48)
			binary.LittleEndian.PutUint32(r[0:], uint32(48+len(l.Extensions)+len(l.Data)))
			binary.LittleEndian.PutUint64(r[8:], l.Index)
			binary.LittleEndian.PutUint64(r[16:], l.Term)
			binary.LittleEndian.PutUint32(r[32:], uint32(len(l.Data)))
			binary.LittleEndian.PutUint32(r[36:], uint32(len(l.Extensions)))
			r[40] = byte(l.Type)
			crc := segment.Checksum(append(append([]byte(nil), r[8:48]...), l.Extensions...))
			binary.LittleEndian.PutUint32(r[4:], crc)
			recs = append(append(append(recs, r...), l.Extensions...), l.Data...)
		}
		fh := make([]byte, 32)
		copy(fh, "JRB1")
		fh[8] = 1 // a batch
		if len(fr) == 0 {
			fh[8] = 2 // an empty frame is a floor mark
		}
		binary.LittleEndian.PutUint32(fh[12:], uint32(len(fr)))
		binary.LittleEndian.PutUint64(fh[16:], floor)
		binary.LittleEndian.PutUint32(fh[24:], uint32(len(recs)))
		binary.LittleEndian.PutUint32(fh[4:], segment.Checksum(fh[8:32]))
		out = append(append(out, fh...), recs...)
	}
	return out
}

// writeRaw writes one segment holding entries, one frame each.
func writeRaw(t testing.TB, dir string, floor uint64, entries []*raft.Log) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var frames [][]*raft.Log
	for _, e := range entries {
		frames = append(frames, []*raft.Log{e})
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.seg", 1)), rawSegment(1, entries[0].Index, floor, frames), 0o600); err != nil {
		t.Fatal(err)
	}
}

func openDirs(t testing.TB, dirs map[string]string, names ...string) []Member {
	t.Helper()
	var ms []Member
	for _, n := range names {
		m, err := OpenDir(n, dirs[n])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms = append(ms, m)
	}
	return ms
}
