package segment_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// An entry read from the cache reads exactly as the same entry read from
// its segment (a reopened log without a cache), whatever it held (no data,
// no extensions but the stamp, an AppendedAt with a monotonic reading);
// and frame buffers reused across synchronous and deferred batches, and a
// cache smaller than what waits for the writer, leave every entry as it
// was stored. Seeded: the seed is logged.
func TestCachedEntriesReadAsStored(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithCacheSize(8), wal.WithSegmentSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]byte{} // index → data as stored
	next := uint64(1)
	for b := 0; b < 300; b++ {
		n := 1 + rng.IntN(20)
		batch := make([]*raft.Log, n)
		for i := range batch {
			e := &raft.Log{Index: next, Term: 1, Type: raft.LogCommand}
			switch rng.IntN(4) {
			case 0: // no data
			case 1:
				e.Data = []byte{}
			default:
				e.Data = make([]byte, rng.IntN(3000))
				for k := range e.Data {
					e.Data[k] = byte(rng.Uint32())
				}
			}
			if rng.IntN(2) == 0 {
				e.AppendedAt = time.Now()
			}
			segment.Stamp(e)
			want[next] = bytes.Clone(e.Data)
			batch[i] = e
			next++
		}
		if rng.IntN(2) == 0 {
			err = l.StoreLogs(batch)
		} else {
			err = l.StoreLogsDeferred(batch)
		}
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		// Read back a few entries, cached or not, while frames wait.
		for k := 0; k < 4; k++ {
			i := 1 + rng.Uint64N(next-1)
			var got raft.Log
			if err := l.GetLog(i, &got); err != nil || !bytes.Equal(got.Data, want[i]) {
				t.Fatalf("after batch %d: entry %d: %v, data equal %v", b, i, err, bytes.Equal(got.Data, want[i]))
			}
		}
	}
	last := next - 1
	awaitDurable(t, l, last)
	cached := make([]raft.Log, 0, 8)
	for i := last - 7; i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		cached = append(cached, e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = wal.Open(dir, wal.WithCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := uint64(1); i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || !bytes.Equal(e.Data, want[i]) {
			t.Fatalf("reopened: entry %d: %v, data equal %v", i, err, bytes.Equal(e.Data, want[i]))
		}
		if i > last-8 {
			if c := cached[i-(last-7)]; !reflect.DeepEqual(c, e) {
				t.Fatalf("entry %d from the cache %s, from its segment %s", i, show(c), show(e))
			}
		}
	}
}

// show describes e without its bytes.
func show(e raft.Log) string {
	return fmt.Sprintf("{index %d term %d type %v data %d B (nil %v) ext %d B (nil %v) at %v}", e.Index, e.Term, e.Type,
		len(e.Data), e.Data == nil, len(e.Extensions), e.Extensions == nil, e.AppendedAt)
}

// A caller that changes an entry's data after storing it (which StoreLogs
// asks callers not to do: the cache shares it) never reads the change
// back: the cached entry no longer matches its stamp and GetLog refuses
// it; the disk holds what was stored, and a reopened log reads it.
func TestChangedDataAfterStoreIsRefusedNotRead(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("stored")
	e := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: buf}
	segment.Stamp(e)
	if err := l.StoreLogs([]*raft.Log{e}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "CHANGE")
	var got raft.Log
	if err := l.GetLog(1, &got); !errors.Is(err, wal.ErrPayloadMismatch) {
		t.Fatalf("GetLog of a changed cached entry: %v (data equal to the change %v), want ErrPayloadMismatch", err, string(got.Data) == "CHANGE")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.GetLog(1, &got); err != nil || string(got.Data) != "stored" {
		t.Fatalf("reopened: %v, data as stored %v", err, string(got.Data) == "stored")
	}
}
