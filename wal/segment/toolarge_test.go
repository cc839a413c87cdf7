package segment_test

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// A record larger than the format's bound (maxRecord) was written and
// acknowledged, but Open reads its header as invalid: as the last frame of
// the last segment it is cut as a torn tail (an acknowledged entry silently
// lost), anywhere else Open refuses the log. StoreLogs must refuse it up
// front, typed, with the log unchanged.
func TestOversizeRecordRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithCacheSize(0), wal.WithPrealloc(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	storeRange(t, l, 1, 1, 1)
	// Unstamped: the store adds a 13-byte stamp, which takes the record
	// just past the bound. The pages are never touched when it is refused.
	big := &raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: make([]byte, segment.MaxRecord-segment.RecHeaderSize)}
	err = l.StoreLogs([]*raft.Log{big})
	if err == nil {
		l.Close()
		l, err = wal.Open(dir, wal.WithCacheSize(0))
		if err != nil {
			t.Fatalf("StoreLogs acknowledged a %d-byte record; Open then fails: %v", segment.MaxRecord+segment.StampSize, err)
		}
		last, _ := l.LastIndex()
		t.Fatalf("StoreLogs acknowledged a %d-byte record; after a reopen the log ends at %d", segment.MaxRecord+segment.StampSize, last)
	}
	var ge *wal.GuardError
	if !errors.As(err, &ge) || !errors.Is(err, wal.ErrTooLarge) || ge.Index != 2 {
		t.Fatalf("oversize record: %v, want a GuardError matching ErrTooLarge at index 2", err)
	}
	if last, _ := l.LastIndex(); last != 1 {
		t.Fatalf("refusal changed the log: last %d", last)
	}
	storeRange(t, l, 2, 3, 1)
}
