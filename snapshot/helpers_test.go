package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// secret is a marker put in artifacts; it must never show up in a
// diagnostic, an error or a log line.
const secret = "SECRET-CONTENTS-7f3a"

// events records store events for assertions.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(k EventKind) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type harness struct {
	t   testing.TB
	dir string
	s   *Store
	ev  *events
	log *syncBuffer
}

// newHarness opens a store in a fresh directory with an event recorder and
// a captured log; extra options come last.
func newHarness(t testing.TB, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, dir: filepath.Join(t.TempDir(), "snapshots"), ev: &events{}, log: &syncBuffer{}}
	h.s = h.open(opts...)
	return h
}

func (h *harness) open(opts ...Option) *Store {
	h.t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Name: "snapshot", Output: h.log, Level: hclog.Debug})
	all := append([]Option{WithLogger(logger), WithEvents(h.ev.add)}, opts...)
	s, err := Open(h.dir, all...)
	if err != nil {
		h.t.Fatalf("Open(%s): %v", h.dir, err)
	}
	return s
}

func testConfiguration() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"},
		{Suffrage: raft.Nonvoter, ID: "n2", Address: "127.0.0.1:7002"},
	}}
}

// put writes one snapshot through the raft.SnapshotStore API and returns
// its ID and Close's error.
func (h *harness) put(index, term uint64, data []byte) (string, error) {
	h.t.Helper()
	sk, err := h.s.Create(1, index, term, testConfiguration(), 1, nil)
	if err != nil {
		h.t.Fatalf("Create(%d, %d): %v", index, term, err)
	}
	// Write in several pieces, as raft's FSM snapshots do.
	for len(data) > 0 {
		n := min(len(data), 1000)
		if _, err := sk.Write(data[:n]); err != nil {
			h.t.Fatalf("Write: %v", err)
		}
		data = data[n:]
	}
	return sk.ID(), sk.Close()
}

func (h *harness) mustPut(index, term uint64, data []byte) string {
	h.t.Helper()
	id, err := h.put(index, term, data)
	if err != nil {
		h.t.Fatalf("Close of snapshot at %d/%d: %v", index, term, err)
	}
	return id
}

func (h *harness) listIDs() []string {
	h.t.Helper()
	metas, err := h.s.List()
	if err != nil {
		h.t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, m := range metas {
		ids = append(ids, m.ID)
	}
	return ids
}

func (h *harness) read(id string) []byte {
	h.t.Helper()
	_, rc, err := h.s.Open(id)
	if err != nil {
		h.t.Fatalf("Open(%s): %v", id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		h.t.Fatalf("read %s: %v", id, err)
	}
	return b
}

// entries lists the names in the store directory, sorted.
func (h *harness) entries() []string {
	h.t.Helper()
	es, err := os.ReadDir(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func payload(n int, seed byte) []byte {
	b := bytes.Repeat([]byte(secret), n/len(secret)+1)[:n]
	for i := range b {
		b[i] ^= seed * byte(i>>7)
	}
	return b
}

// flipByte flips one bit of the file at off.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func appendByte(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
}

func asGate(t testing.TB, err error) *GateError {
	t.Helper()
	var g *GateError
	if !errors.As(err, &g) {
		t.Fatalf("error %v (%T) is not a *GateError", err, err)
	}
	return g
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-tick.C:
		}
	}
}
