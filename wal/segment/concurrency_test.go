package segment_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
)

// Reads run concurrently with every write: appends with rotation,
// compaction, suffix truncation and reset. A read returns the entry it was
// asked for, intact, or raft.ErrLogNotFound; never damage, never another
// index's bytes.
func TestReadsConcurrentWithWrites(t *testing.T) {
	dir := t.TempDir()
	var floor atomic.Uint64
	l, err := wal.Open(dir, wal.WithSegmentSize(4<<10), wal.WithCacheSize(16))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetCommitFloor(floor.Load)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for k := uint64(r); ; k++ {
				select {
				case <-done:
					return
				default:
				}
				first, _ := l.FirstIndex()
				last, _ := l.LastIndex()
				if last == 0 {
					continue
				}
				i := first + k%(last-first+1)
				var e raft.Log
				err := l.GetLog(i, &e)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue
				}
				if err == nil && (e.Index != i || string(e.Data) != string(crashPayload(i, e.Term))) {
					err = errors.New("wrong entry")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(r)
	}
	term := uint64(1)
	next := uint64(1)
	for round := 0; round < 60; round++ {
		storeRangeNoT(l, next, next+39, term, errs)
		next += 40
		switch round % 4 {
		case 1: // compaction
			first, _ := l.FirstIndex()
			floor.Store(next - 20)
			if err := l.DeleteRange(first, next-25); err != nil {
				t.Fatal(err)
			}
		case 2: // suffix truncation
			term++
			if err := l.DeleteRange(next-10, next-1); err != nil {
				t.Fatal(err)
			}
			next -= 10
		case 3:
			if round%8 == 7 { // reset
				first, _ := l.FirstIndex()
				floor.Store(next + 5)
				if err := l.DeleteRange(first, next-1); err != nil {
					t.Fatal(err)
				}
				next += 6
			}
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func storeRangeNoT(l *wal.Log, a, b, term uint64, errs chan<- error) {
	for i := a; i <= b; i += 8 {
		var batch []*raft.Log
		for k := i; k < i+8 && k <= b; k++ {
			batch = append(batch, crashEntry(k, term))
		}
		if err := l.StoreLogs(batch); err != nil {
			select {
			case errs <- err:
			default:
			}
			return
		}
	}
}
