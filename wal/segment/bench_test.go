package segment_test

// Comparative benchmarks, lined up for benchstat:
//
//	BenchmarkStoreLogs/store={wal,bolt,guard+bolt,raw}/batch={1,64,512}/size={256B,1KiB,64KiB}
//	BenchmarkGetLog/store={wal,wal-nocache,bolt,guard+bolt,raw}
//
// wal is *Log (the guard built in); bolt is raft-boltdb/v2 with fsync on;
// guard+bolt is NewGuard over it; raw is the same bytes *Log writes for the
// batch, written with one write and one fdatasync to an append-only file
// with no store around it: the limit of this disk. Entries are built and
// stamped before the timer, so every store gets identical input. Run:
//
//	go test ./wal/segment/ -run '^$' -bench . -benchtime 2s

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

type benchStore interface {
	raft.LogStore
	Close() error
}

// benchGuard is NewGuard over raft-boltdb/v2, closing the inner store.
type benchGuard struct {
	*wal.Guard
	bolt *raftboltdb.BoltStore
}

func (g benchGuard) Close() error { return g.bolt.Close() }

// benchRaw appends encoded batches to a file: one write, one fdatasync.
type benchRaw struct {
	f   *os.File
	buf []byte
}

func (r *benchRaw) StoreLogs(entries []*raft.Log) error {
	buf := r.buf[:segment.FrameHeaderSize]
	for _, e := range entries {
		buf = segment.AppendRecord(buf, e)
	}
	segment.FrameHeader{Kind: segment.FrameBatch, Count: uint32(len(entries)), BodyLen: uint32(len(buf) - segment.FrameHeaderSize)}.Put(buf)
	r.buf = buf
	if _, err := r.f.Write(buf); err != nil {
		return err
	}
	return syscall.Fdatasync(int(r.f.Fd()))
}

func (r *benchRaw) Close() error { return r.f.Close() }

func benchOpen(b *testing.B, kind, dir string, walOpts ...wal.Option) benchStore {
	b.Helper()
	switch kind {
	case "wal":
		l, err := wal.Open(dir, walOpts...)
		if err != nil {
			b.Fatal(err)
		}
		l.SetCommitFloor(func() uint64 { return 0 })
		return l
	case "bolt", "guard+bolt":
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		if err != nil {
			b.Fatal(err)
		}
		if kind == "bolt" {
			return s
		}
		g := wal.NewGuard(s)
		g.SetCommitFloor(func() uint64 { return 0 })
		return benchGuard{Guard: g, bolt: s}
	}
	b.Fatalf("unknown store %q", kind)
	return nil
}

// benchBatch returns n stamped command entries sharing one payload of size
// bytes; the caller sets the indexes.
func benchBatch(n, size int) []*raft.Log {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	tmpl := raft.Log{Term: 1, Type: raft.LogCommand, Data: data}
	segment.Stamp(&tmpl)
	out := make([]*raft.Log, n)
	for i := range out {
		e := tmpl
		out[i] = &e
	}
	return out
}

func benchSizeName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

func BenchmarkStoreLogs(b *testing.B) {
	for _, kind := range []string{"wal", "bolt", "guard+bolt", "raw"} {
		for _, batch := range []int{1, 64, 512} {
			for _, size := range []int{256, 1 << 10, 64 << 10} {
				name := fmt.Sprintf("store=%s/batch=%d/size=%s", kind, batch, benchSizeName(size))
				b.Run(name, func(b *testing.B) { benchStoreLogs(b, kind, batch, size) })
			}
		}
	}
}

func benchStoreLogs(b *testing.B, kind string, batch, size int) {
	dir := b.TempDir()
	var st interface {
		StoreLogs([]*raft.Log) error
		Close() error
	}
	if kind == "raw" {
		f, err := os.OpenFile(filepath.Join(dir, "raw"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		st = &benchRaw{f: f, buf: make([]byte, segment.FrameHeaderSize, segment.FrameHeaderSize+batch*(segment.RecHeaderSize+segment.StampSize+size))}
	} else {
		st = benchOpen(b, kind, dir)
	}
	defer st.Close()
	entries := benchBatch(batch, size)
	next := uint64(1)
	b.SetBytes(int64(batch * size))
	b.ResetTimer()
	for b.Loop() {
		for i, e := range entries {
			e.Index = next + uint64(i)
		}
		next += uint64(batch)
		if err := st.StoreLogs(entries); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(next-1)/s, "entries/s")
	}
}

// BenchmarkGetLog reads random entries among 100k stored ones (256 B
// payloads). wal-nocache reads every entry from its file (WithCacheSize(0));
// wal has the default cache of recent entries, which random reads mostly
// miss. raw is a pread of the record's bytes at a known offset, no decoding.
func BenchmarkGetLog(b *testing.B) {
	const n, size = 100_000, 256
	entries := benchBatch(512, size)
	fill := func(st raft.LogStore) {
		for a := uint64(1); a <= n; a += 512 {
			k := min(512, int(n-a+1))
			for i := range k {
				entries[i].Index = a + uint64(i)
			}
			if err := st.StoreLogs(entries[:k]); err != nil {
				b.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	idx := make([]uint64, 1<<16)
	for i := range idx {
		idx[i] = 1 + rng.Uint64N(n)
	}
	for _, kind := range []string{"wal", "wal-nocache", "bolt", "guard+bolt", "raw"} {
		dir := b.TempDir()
		if kind == "raw" {
			b.Run("store="+kind, func(b *testing.B) { benchGetRaw(b, dir, n, size, idx) })
			continue
		}
		var st benchStore
		switch kind {
		case "wal":
			st = benchOpen(b, "wal", dir)
		case "wal-nocache":
			st = benchOpen(b, "wal", dir, wal.WithCacheSize(0))
		default:
			st = benchOpen(b, kind, dir)
		}
		fill(st)
		b.Run("store="+kind, func(b *testing.B) {
			var e raft.Log
			b.SetBytes(size)
			i := 0
			for b.Loop() {
				if err := st.GetLog(idx[i&(len(idx)-1)], &e); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "entries/s")
		})
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchGetRaw(b *testing.B, dir string, n uint64, size int, idx []uint64) {
	rec := segment.RecHeaderSize + segment.StampSize + size
	f, err := os.OpenFile(filepath.Join(dir, "raw"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(n) * int64(rec)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, rec)
	b.SetBytes(int64(size))
	i := 0
	for b.Loop() {
		if _, err := f.ReadAt(buf, int64(idx[i&(len(idx)-1)]-1)*int64(rec)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "entries/s")
}
