package backup

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// bigState applies n jobs with 64-byte payloads to a new state machine.
func bigState(t testing.TB, n int) *fsm.Jobs {
	t.Helper()
	m := fsm.New()
	payload := make([]byte, 64)
	const batch = 1000
	at := time.Unix(1_700_000_000, 0)
	for i, index := 0, uint64(1); i < n; i, index = i+batch, index+1 {
		var jobs []fsm.NewJob
		for j := i; j < min(i+batch, n); j++ {
			jobs = append(jobs, fsm.NewJob{ID: fmt.Sprintf("job-%08d", j), Queue: "q", Kind: "k", Payload: payload})
		}
		cmd, err := fsm.EncodeCommand(&fsm.SubmitCmd{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		m.Apply(fsm.Entry{Index: index, Term: 1, Time: at, Cmd: cmd})
	}
	if m.Len() != n {
		t.Fatalf("state holds %d jobs, want %d", m.Len(), n)
	}
	return m
}

func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakHeap runs f while sampling the heap and returns the highest heap
// in use seen, with the collector run at 5 % growth so that garbage
// counts little.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	var (
		peak uint64
		mu   sync.Mutex
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapAlloc)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				sample()
			}
		}
	}()
	f()
	sample()
	close(stop)
	<-done
	return peak
}

var member = raft.Status{ID: "n1", Term: 2, Members: []raft.Member{{ID: "n1", Address: "127.0.0.1:1", Voter: true}}}

// A backup of 200 000 jobs grows the heap by far less than the state it
// backs up: the state is streamed, verified without being rebuilt, and
// copied out in chunks.
func TestWriteHeapDoesNotGrowWithTheState(t *testing.T) {
	const n = 200_000
	base := heapNow()
	m := bigState(t, n)
	state := heapNow() - base
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	before := heapNow()
	var out countingWriter
	var man *Manifest
	peak := peakHeap(func() {
		man, err = Write(&out, snap, member, Options{TempDir: t.TempDir()})
	})
	if err != nil {
		t.Fatal(err)
	}
	growth := peak - min(peak, before)
	t.Logf("state %d jobs: %d B on the heap (%d B/job); backup %d B; heap growth during Write %d B (%.3f of the state)",
		n, state, state/n, out.n, growth, float64(growth)/float64(state))
	if man.Jobs != n || man.StateDigest != hexSum(m.Digest().Sum) {
		t.Fatalf("manifest: %d jobs, digest %s; state %d jobs, %x", man.Jobs, man.StateDigest, n, m.Digest().Sum)
	}
	if limit := state / 4; growth > limit {
		t.Fatalf("heap grew by %d B during Write, more than a quarter of the state's %d B", growth, state)
	}
	runtime.KeepAlive(m)
}

func hexSum(b [32]byte) string { return hex.EncodeToString(b[:]) }

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// What Write wrote decodes and verifies whole (VerifyFile is the file
// form; here the same checks on the bytes).
func TestWriteVerifies(t *testing.T) {
	m := bigState(t, 3000)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	man, err := Write(&buf, snap, member, Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got, ar, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	info, err := fsm.VerifySnapshot(ar, got.Size, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, ar); err != nil {
		t.Fatal(err)
	}
	if info.Index != man.Index || info.Jobs != man.Jobs || hexSum(info.Digest) != man.StateDigest {
		t.Fatalf("verified %+v, manifest %+v", info, man)
	}
}
