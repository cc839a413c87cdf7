package segment_test

import (
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// Deferred batches that wait together are written as one frame, so a power
// loss that tears any of them is a torn tail cut whole at the next Open —
// never a damaged frame followed by an intact one, which Open would refuse.
func TestDeferredBatchesWaitingShareOneFrame(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(a, b uint64) []*raft.Log {
		var out []*raft.Log
		for i := a; i <= b; i++ {
			out = append(out, crashEntry(i, 1))
		}
		return out
	}
	if err := l.StoreLogs(batch(1, 8)); err != nil {
		t.Fatal(err)
	}
	// Hold the writer off (as while it syncs an earlier frame) so the
	// three batches wait together.
	l.FlushMu().Lock()
	for a := uint64(9); a <= 25; a += 8 {
		if err := l.StoreLogsDeferred(batch(a, a+7)); err != nil {
			l.FlushMu().Unlock()
			t.Fatal(err)
		}
	}
	l.Mu().RLock()
	from, count := l.Pend()
	segs := l.Segs()
	tail := segs[len(segs)-1]
	at18 := int64(tail.Offs[18-tail.Base])
	l.Mu().RUnlock()
	l.FlushMu().Unlock()
	if count != 24 {
		t.Fatalf("the waiting frame holds %d entries, want 24 (three batches)", count)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.Durable() < 32 {
		if time.Now().After(deadline) {
			t.Fatalf("durable %d, want 32", l.Durable())
		}
		<-l.DurableChanged()
	}
	path := tail.Path
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, segment.FrameHeaderSize)
	if _, err := f.ReadAt(hdr, from); err != nil {
		t.Fatal(err)
	}
	h, err := segment.DecodeFrameHeader(hdr)
	if err != nil || h.Count != 24 {
		t.Fatalf("frame at %d: %+v, %v; want one batch frame of 24 entries", from, h, err)
	}
	// Tear the first batch's part of the frame (entry 18's record) while
	// the later batches' bytes stay intact.
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at18+segment.RecHeaderSize); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at18+segment.RecHeaderSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := wal.Open(dir)
	if err != nil {
		t.Fatalf("reopen over a torn deferred frame: %v (it must be cut as a torn tail)", err)
	}
	defer r.Close()
	if last, _ := r.LastIndex(); last != 8 {
		t.Fatalf("last index %d after the torn frame was cut, want 8", last)
	}
}
