package wal

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

func entry(i, t uint64, data string) *raft.Log {
	return &raft.Log{Index: i, Term: t, Type: raft.LogCommand, Data: []byte(data)}
}

func stamped(i, t uint64, data string) *raft.Log {
	e := entry(i, t, data)
	segment.Stamp(e)
	return e
}

func TestLogRoundTripAndReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		batch = append(batch, stamped(i, 1+i/100, fmt.Sprintf("payload-%d", i)))
		if len(batch) == 7 || i == 300 {
			if err := l.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	check := func(l *Log) {
		t.Helper()
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if first != 1 || last != 300 {
			t.Fatalf("first %d last %d", first, last)
		}
		for i := uint64(1); i <= 300; i++ {
			var e raft.Log
			if err := l.GetLog(i, &e); err != nil {
				t.Fatalf("get %d: %v", i, err)
			}
			if e.Index != i || e.Term != 1+i/100 || !bytes.Equal(e.Data, []byte(fmt.Sprintf("payload-%d", i))) {
				t.Fatalf("entry %d: %+v", i, e)
			}
		}
		var e raft.Log
		if err := l.GetLog(301, &e); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("get 301: %v", err)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, WithCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l)
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("expected rotation, got %d segments", len(segs))
	}
}
