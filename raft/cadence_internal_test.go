package raft

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

// The byte marks count from the mark that covers a snapshot: the latest
// at or below its index (raft's index can be past the state machine's by
// barriers and no-ops), keep it when more marks come (attempts that did
// not seal), and start afresh at a restore.
func TestByteMarks(t *testing.T) {
	var b byteMarks
	b.restored(0)
	apply := func(n int) { b.add([]*hraft.Log{{Data: make([]byte, n-2), Extensions: []byte{1, 2}}}) }
	want := func(index, n uint64, ok bool) {
		t.Helper()
		if got, gotOK := b.since(index); got != n || gotOK != ok {
			t.Fatalf("since(%d) = %d, %v; want %d, %v", index, got, gotOK, n, ok)
		}
	}
	apply(100) // index 1
	want(0, 100, true)
	b.mark(1) // a snapshot's state machine part at 1; raft's snapshot is at 3 (two barriers)
	apply(50)
	want(3, 50, true)
	b.sealed(3)
	want(0, 0, false) // the mark at 0 is gone: no snapshot will be counted from it
	// Attempts that never seal (a configuration change not applied yet)
	// mark again and again: the mark at the sealed snapshot stays.
	for i := uint64(4); i < 4+2*maxByteMarks; i++ {
		apply(10)
		b.mark(i)
	}
	if len(b.marks) > maxByteMarks {
		t.Fatalf("%d marks kept", len(b.marks))
	}
	want(3, 50+20*maxByteMarks, true)
	// A snapshot installed at 100 and restored: nothing applied since.
	b.restored(100)
	want(100, 0, true)
	want(99, 0, false)
	apply(7)
	want(100, 7, true)
}
