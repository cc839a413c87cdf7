package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// withLoad runs f with GOMAXPROCS procs and chunks of at most records
// job records (snapshot_load.go), restoring both after.
func withLoad(procs, records int, f func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	defer func(n int) { chunkRecords = n }(chunkRecords)
	chunkRecords = records
	f()
}

// bigState is richState plus n jobs in every state: pending of three
// priorities, scheduled, running (with claim IDs), succeeded, dead.
func bigState(t testing.TB, n int) *Jobs {
	t.Helper()
	m := richState(t)
	index := m.AppliedIndex()
	apply := func(c Command) Result {
		index++
		r, _ := DecodeResult(m.Apply(Entry{Index: index, Term: 1, Time: baseTime.Add(time.Second), Cmd: appendCommand(nil, c)}))
		return r
	}
	for done := 0; done < n; done += 100 {
		jobs := make([]NewJob, min(n-done, 100))
		for i := range jobs {
			jobs[i] = NewJob{ID: fmt.Sprintf("z%07d", done+i), Queue: "big" + strconv.Itoa(i%3), Kind: "k" + strconv.Itoa(i%2),
				Payload: bytes.Repeat([]byte{byte(i)}, i), Priority: int32(i % 3), IdempotencyKey: fmt.Sprintf("key%d", done+i)}
			if i%10 == 0 {
				jobs[i].RunAt = baseTime.Add(time.Hour)
			}
		}
		apply(&SubmitCmd{Jobs: jobs})
		r := apply(&ClaimCmd{Queues: []string{"big0", "big1"}, Worker: "w", Max: 30, TTL: time.Minute, ID: "c" + strconv.Itoa(done)})
		for i, j := range r.Jobs {
			switch i % 3 {
			case 0:
				apply(&AckCmd{ID: j.ID, Token: j.Lease.Token, Result: []byte("ok")})
			case 1:
				apply(&TermCmd{ID: j.ID, Token: j.Lease.Token, Reason: "no"})
			}
		}
	}
	return m
}

// A restore gives the same state, byte for byte, at any GOMAXPROCS and
// any chunk size: the state's own snapshot.
func TestRestoreSameAtAnyGOMAXPROCS(t *testing.T) {
	m := bigState(t, 3000)
	want := snapBytes(t, m)
	for _, procs := range []int{1, 4} {
		for _, records := range []int{1, 7, 512} {
			withLoad(procs, records, func() {
				r := New()
				if err := r.Restore(bytes.NewReader(want)); err != nil {
					t.Fatalf("GOMAXPROCS %d, chunks of %d: %v", procs, records, err)
				}
				if r.Digest() != m.Digest() || !bytes.Equal(snapBytes(t, r), want) {
					t.Fatalf("GOMAXPROCS %d, chunks of %d: another state", procs, records)
				}
			})
		}
	}
}

// Every one-byte change and every truncation of a snapshot gets the same
// error, message included, from one decoder reading one record a chunk
// as from four reading chunks of several: the records' errors come in
// stream order, before the framing errors after them.
func TestRestoreErrorsDoNotDependOnTheDecoders(t *testing.T) {
	good := snapBytes(t, bigState(t, 4))
	var inputs [][]byte
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x10
		inputs = append(inputs, bad, good[:i])
	}
	errs := func(procs, records int) []string {
		out := make([]string, len(inputs))
		withLoad(procs, records, func() {
			for i, b := range inputs {
				err := New().Restore(bytes.NewReader(b))
				if err == nil {
					continue
				}
				if !IsCorrupt(err) && !errors.Is(err, ErrSnapshotVersion) {
					t.Fatalf("untyped error %v", err)
				}
				out[i] = err.Error()
			}
		})
		return out
	}
	want := errs(1, 1)
	for _, c := range [][2]int{{4, 3}, {2, 512}} {
		for i, got := range errs(c[0], c[1]) {
			if got != want[i] {
				t.Fatalf("GOMAXPROCS %d, chunks of %d, input %d (%d bytes): %q; one decoder, one record a chunk: %q", c[0], c[1], i, len(inputs[i]), got, want[i])
			}
		}
	}
}

// failingReader returns err once it has returned n bytes.
type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

// settled waits (up to 10 s) for the number of goroutines to come back to
// at most n.
func settled(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// A stream corrupt, truncated or failing half-way through its job
// records fails Restore (and VerifySnapshot) with its error, replaces
// nothing, and leaves no goroutine running.
func TestRestoreFailingMidwayEndsItsGoroutines(t *testing.T) {
	m := bigState(t, 20000)
	good := snapBytes(t, m)
	mid := len(good) / 2
	flipped := func(at int) []byte {
		b := append([]byte(nil), good...)
		b[at] ^= 0x10
		return b
	}
	// A job record's ID in the middle: find one.
	at := bytes.Index(good[mid:], []byte("z00")) + mid
	errRead := errors.New("disk on fire")
	for _, c := range []struct {
		name string
		r    func() io.Reader
		is   error
	}{
		{"record", func() io.Reader { return bytes.NewReader(flipped(at)) }, ErrCorruptSnapshot},
		{"first record", func() io.Reader {
			return bytes.NewReader(flipped(bytes.Index(good, []byte("z0000000"))))
		}, ErrCorruptSnapshot},
		{"length", func() io.Reader { return bytes.NewReader(flipped(at - 2)) }, ErrCorruptSnapshot},
		{"checksum", func() io.Reader { return bytes.NewReader(flipped(len(good) - 1)) }, ErrCorruptSnapshot},
		{"truncated", func() io.Reader { return bytes.NewReader(good[:mid]) }, ErrCorruptSnapshot},
		{"read error", func() io.Reader { return &failingReader{r: bytes.NewReader(good), n: mid, err: errRead} }, errRead},
	} {
		for _, procs := range []int{1, 2, 4} {
			withLoad(procs, 512, func() {
				before := runtime.NumGoroutine()
				target := bigState(t, 0)
				want := target.Digest()
				if err := target.Restore(c.r()); !errors.Is(err, c.is) {
					t.Fatalf("%s, GOMAXPROCS %d: %v", c.name, procs, err)
				}
				if target.Digest() != want {
					t.Fatalf("%s: a failed restore changed the state", c.name)
				}
				if _, err := VerifySnapshot(c.r(), 0, nil); !errors.Is(err, c.is) {
					t.Fatalf("%s, verify, GOMAXPROCS %d: %v", c.name, procs, err)
				}
				settled(t, before)
			})
		}
	}
}

// panicSink panics on its job record at.
type panicSink struct {
	restoreSink
	n, at int
}

func (p *panicSink) job(st *state, j *job, sum [4]uint64) error {
	if p.n++; p.n == p.at {
		panic("sink")
	}
	return p.restoreSink.job(st, j, sum)
}

// A panic while the records are applied reaches the caller's goroutine
// (as it did when one goroutine read the whole stream), and the
// decoders end.
func TestRestorePanicReachesTheCaller(t *testing.T) {
	good := snapBytes(t, bigState(t, 5000))
	before := runtime.NumGoroutine()
	func() {
		defer func() {
			if v := recover(); v != "sink" {
				t.Fatalf("recovered %v", v)
			}
		}()
		readStream(bytes.NewReader(good), &panicSink{at: 2500})
		t.Fatal("no panic")
	}()
	settled(t, before)
}

// Restored jobs share their class (queue, kind, backoff policy, max
// attempts), as applied ones do: one per distinct combination.
func TestRestoreInternsClasses(t *testing.T) {
	r := New()
	if err := r.Restore(bytes.NewReader(snapBytes(t, bigState(t, 200)))); err != nil {
		t.Fatal(err)
	}
	type key struct {
		queue string
		k     classKey
	}
	seen, keys := map[*class]bool{}, map[key]bool{}
	r.st.jobs.Scan(func(e idEnt) bool {
		c := e.sl.j.cls
		seen[c] = true
		keys[key{c.queue, c.classKey}] = true
		return true
	})
	if len(seen) != len(keys) {
		t.Fatalf("%d classes for %d combinations of queue, kind and policy", len(seen), len(keys))
	}
}
