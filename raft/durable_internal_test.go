package raft

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
	"github.com/jobraft/jobraft/wal/segment"
)

// The leader's store is deferred, but a batch holding a configuration entry
// is on disk when StoreLogs returns: hashicorp/raft acts on a
// configuration's commit (the next membership change) from its own commit
// index, without the state machine's gate.
func TestConfigurationEntriesAreStoredSynchronously(t *testing.T) {
	ffs := faultfs.New(wal.OSFS{})
	l, err := wal.Open(t.TempDir(), wal.WithFS(ffs))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var inRaft atomic.Int64
	rl := raftLog{Log: l, inRaft: &inRaft}
	cmd := func(i uint64) *hraft.Log {
		e := &hraft.Log{Index: i, Term: 1, Type: hraft.LogCommand, Data: seal(time.Unix(1, 0), []byte("x"))}
		segment.Stamp(e)
		return e
	}
	if err := rl.StoreLogs([]*hraft.Log{cmd(1)}); err != nil { // an empty log: synchronous
		t.Fatal(err)
	}
	release := ffs.HoldSyncs()
	defer release() // before Close, which waits for the writer
	if err := rl.StoreLogs([]*hraft.Log{cmd(2), cmd(3)}); err != nil {
		t.Fatal(err)
	}
	if d := l.Durable(); d != 1 {
		t.Fatalf("durable %d after a deferred command batch with fsync held, want 1 (deferred)", d)
	}
	done := make(chan error, 1)
	go func() {
		done <- rl.StoreLogs([]*hraft.Log{cmd(4), {Index: 5, Term: 1, Type: hraft.LogConfiguration, Data: []byte("conf")}})
	}()
	select {
	case err := <-done:
		t.Fatalf("a batch with a configuration entry returned (%v) before the disk held it", err)
	case <-time.After(200 * time.Millisecond): // it must still be waiting for the held fsync
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := l.Durable(); d != 5 {
		t.Fatalf("durable %d when the configuration batch returned, want 5", d)
	}
}

// Once the gate refused a batch (the log failed before it held it), the
// state machine applies nothing after it and takes no snapshot: it never
// holds a later entry without an earlier one.
func TestGateRefusalIsSticky(t *testing.T) {
	sm := &countingSM{}
	a := newAdapter(sm, nil)
	durable := uint64(1)
	a.gate = func(index uint64) bool { return index <= durable }
	entry := func(i uint64, cmd string) *hraft.Log {
		return &hraft.Log{Index: i, Term: 1, Type: hraft.LogCommand, Data: seal(time.Unix(1, 0), []byte(cmd))}
	}
	if res := a.ApplyBatch([]*hraft.Log{entry(1, "set a 1")}); res[0].(applyResult).err != nil {
		t.Fatalf("durable batch: %v", res[0].(applyResult).err)
	}
	res := a.ApplyBatch([]*hraft.Log{entry(2, "set b 2")})
	if err := res[0].(applyResult).err; !errors.Is(err, errNotDurable) {
		t.Fatalf("batch past the durable index: %v, want errNotDurable", err)
	}
	durable = 3 // a later batch the gate would let through
	res = a.ApplyBatch([]*hraft.Log{entry(3, "set c 3")})
	if err := res[0].(applyResult).err; !errors.Is(err, errNotDurable) {
		t.Fatalf("batch after a refused one: %v, want errNotDurable", err)
	}
	if got := a.applied.Load(); got != 1 || sm.applied != 1 {
		t.Fatalf("applied index %d, %d commands applied; want 1 and 1", got, sm.applied)
	}
	if _, err := a.Snapshot(); !errors.Is(err, errNotDurable) {
		t.Fatalf("snapshot after a refused batch: %v, want errNotDurable", err)
	}
}

// countingSM counts the commands applied to it.
type countingSM struct{ applied int }

func (s *countingSM) Apply(Entry) []byte          { s.applied++; return nil }
func (s *countingSM) Snapshot() (Snapshot, error) { return nil, errors.New("not in this test") }
func (s *countingSM) Restore(io.Reader) error     { return nil }
func (s *countingSM) Digest() Digest              { return Digest{} }
