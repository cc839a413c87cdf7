package walcompare_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
	"github.com/jobraft/jobraft/walcompare"
)

// BenchmarkOfflineCompare: 3 members × 1M entries of 256 B in wal dirs
// written by the real log (one member written, two copied), compared from
// disk (page cache warm after the first run).
func BenchmarkOfflineCompare(b *testing.B) {
	const n = 1_000_000
	base := b.TempDir()
	first := filepath.Join(base, "m0")
	l, err := wal.Open(first)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]*raft.Log, 0, 4096)
	data := make([]byte, 256)
	for ix := uint64(1); ix <= n; ix++ {
		binary.LittleEndian.PutUint64(data, ix)
		e := &raft.Log{Index: ix, Term: 1 + ix/100_000, Type: raft.LogCommand, Data: append([]byte(nil), data...)}
		segment.Stamp(e)
		batch = append(batch, e)
		if len(batch) == cap(batch) || ix == n {
			if err := l.StoreLogs(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	for _, m := range []string{"m1", "m2"} {
		if out, err := exec.Command("cp", "-r", first, filepath.Join(base, m)).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var ms []walcompare.Member
		for _, m := range []string{"m0", "m1", "m2"} {
			mem, err := walcompare.OpenDir(m, filepath.Join(base, m))
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, mem)
		}
		r, err := walcompare.Compare(context.Background(), ms, walcompare.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Summary[walcompare.Same] != n || len(r.Divergences) != 0 {
			b.Fatalf("summary %v", r.Summary)
		}
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(n)*float64(b.N)/el, "entries/s/member")
}

// synthStore is a read-only raft.LogStore of n entries computed from their
// index (32-byte stamped payloads), with one index altered when odd > 0. It
// stands in for a 10M-entry log (~3 GB on disk) in the online benchmark.
type synthStore struct {
	n, odd uint64
}

func (s *synthStore) FirstIndex() (uint64, error) { return 1, nil }
func (s *synthStore) LastIndex() (uint64, error)  { return s.n, nil }
func (s *synthStore) GetLog(ix uint64, l *raft.Log) error {
	if ix == 0 || ix > s.n {
		return raft.ErrLogNotFound
	}
	d := make([]byte, 32)
	binary.LittleEndian.PutUint64(d, ix)
	if ix == s.odd {
		d[31] = 1
	}
	*l = raft.Log{Index: ix, Term: 1 + ix/1_000_000, Type: raft.LogCommand, Data: d}
	segment.Stamp(l)
	return nil
}

var errReadOnly = errors.New("synthetic store is read-only")

func (s *synthStore) StoreLog(*raft.Log) error      { return errReadOnly }
func (s *synthStore) StoreLogs([]*raft.Log) error   { return errReadOnly }
func (s *synthStore) DeleteRange(_, _ uint64) error { return errReadOnly }

// serve listens on loopback and serves DigestMethod for s, as a node does.
func serve(tb testing.TB, s raft.LogStore) string {
	mux, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mux.Close() })
	mux.Handle(walcompare.DigestMethod, func(ctx context.Context, req []byte) ([]byte, error) {
		return walcompare.ServeDigest(ctx, s, func() uint64 { return 0 }, req)
	})
	return mux.Addr()
}

// BenchmarkOnlineSearch: find one divergent index among 3 live members of
// 10M entries each, served over the real RPC layer (transport.Mux, the
// node's handler) from synthetic stores. Reports RPC calls, sequential
// round trips and the comparer's heap growth.
func BenchmarkOnlineSearch(b *testing.B) {
	n := uint64(10_000_000)
	if s := os.Getenv("WALCOMPARE_BENCH_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	const odd = 7_654_321
	ctx := context.Background()
	var ms []walcompare.Member
	for i, st := range []*synthStore{{n: n}, {n: n, odd: odd % n}, {n: n}} {
		m, err := walcompare.Dial(ctx, fmt.Sprintf("m%d", i), serve(b, st), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	b.ResetTimer()
	var calls int64
	var heap uint64
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, err := walcompare.Compare(ctx, ms, walcompare.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if len(r.Divergences) != 1 || r.Divergences[0].Index != odd%n || r.Divergences[0].Class != walcompare.PayloadMismatch {
			b.Fatalf("divergences %+v", r.Divergences)
		}
		calls = r.Calls
		heap = max(heap, after.HeapInuse-min(after.HeapInuse, before.HeapInuse))
	}
	b.ReportMetric(float64(calls), "calls")
	b.ReportMetric(float64(calls)/3, "round-trips")
	b.ReportMetric(float64(heap), "heap-growth-B")
}
