package segment_test

// Every durability shortcut of the log judged against an honest power loss
// (wal/faultfs PowerLoss: what was fsynced stays, the rest is gone), at
// every instant: the power goes just before each change of the disk in
// turn (powerloss_harness_test.go), the log is reopened from its directory,
// must hold everything it acknowledged (a returned StoreLogs, DeleteRange,
// SyncFloor; every value Durable and PersistedFloor reported, before the
// loss and after), nothing that was not written there, and must go on.

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// settle waits until everything stored is durable, or the log failed (the
// power went under its writer).
func settle(t *testing.T, l *wal.Log, m *logModel) {
	deadline := time.After(20 * time.Second)
	for !m.stopped() {
		ch := l.DurableChanged()
		if l.Durable() == lastIndex(l) || l.Failure() != "" {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("durable %d, last %d: the writer never caught up", l.Durable(), lastIndex(l))
		}
	}
	m.observe(l)
}

// The deferred frame: entries are durable exactly when Durable says so.
// After the loss the log holds at least every entry at or below the last
// value Durable reported (before the loss or after it); entries above it
// may be there or not.
func TestPowerLossDeferredFrame(t *testing.T) {
	powerLossPoints(t, nil, func(l *wal.Log, m *logModel) {
		m.store(l, 1, 8, 1, false)
		for a := uint64(9); a <= 65; a += 8 {
			m.store(l, a, a+7, 1, true)
		}
		m.store(l, 73, 76, 2, false) // makes everything waiting durable first
		for a := uint64(77); a <= 101; a += 8 {
			m.store(l, a, a+7, 2, true)
		}
		settle(t, l, m)
	})
}

// The same at the instant that matters most, made certain: the writer's
// frame is written and its fsync held, another frame waits in memory, and
// Durable says 16. The loss keeps at least 16 entries; a Durable that ran
// ahead of its fsync would have said 32.
func TestPowerLossDuringHeldDeferredSync(t *testing.T) {
	dir := t.TempDir()
	l, ffs := openFault(t, dir)
	if err := l.StoreLogs(ftBatch(1, 16)); err != nil {
		t.Fatal(err)
	}
	ffs.HoldSyncs() // never released: the power goes first
	if err := l.StoreLogsDeferred(ftBatch(17, 32)); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, ffs, 1)
	if err := l.StoreLogsDeferred(ftBatch(33, 48)); err != nil {
		t.Fatal(err)
	}
	before := l.Durable()
	if p := ffs.Unsynced(); p.Files != 1 || p.Bytes == 0 {
		t.Fatalf("unsynced before the loss: %+v, want the written frame of one segment", p)
	}
	if err := ffs.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	after := l.Durable()
	// What waited could not be made durable: Close must not say it was.
	if err := l.Close(); !errors.Is(err, wal.ErrFailed) || !errors.Is(err, faultfs.ErrPowerLost) {
		t.Fatalf("Close after the loss: %v, want ErrFailed (ErrPowerLost)", err)
	}
	r, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	last := lastIndex(r)
	if last < max(before, after) {
		t.Fatalf("reopened log ends at %d; Durable reported %d before the loss and %d after", last, before, after)
	}
	ftCheck(t, r, last)
	t.Logf("durable %d before the loss, %d after; the reopened log ends at %d", before, after, last)
}

// Group commit: appenders take turns (indexes are contiguous), mixing
// StoreLogs and StoreLogsDeferred, racing the log's writer and a goroutine
// that records every Durable value. Every StoreLogs that returned nil, and
// every entry Durable covered, survives.
func TestPowerLossGroupCommit(t *testing.T) {
	powerLossPoints(t, nil, func(l *wal.Log, m *logModel) {
		m.store(l, 1, 4, 1, false)
		var turn sync.Mutex
		next := uint64(5)
		done := make(chan struct{})
		var observer sync.WaitGroup
		observer.Add(1)
		go func() {
			defer observer.Done()
			for {
				ch := l.DurableChanged()
				m.observe(l)
				select {
				case <-ch:
				case <-done:
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; ; k++ {
					turn.Lock()
					a := next
					if a > 96 || m.stopped() {
						turn.Unlock()
						return
					}
					next += 4
					m.store(l, a, a+3, 1, (k+g)%3 != 0)
					turn.Unlock()
				}
			}()
		}
		wg.Wait()
		settle(t, l, m)
		close(done)
		observer.Wait()
	})
}

// Preallocation: the tail is zero-filled ahead of its last frame, the
// zeros synced with the batch that wrote them. A batch lost over the zeros
// leaves zeros (or a shorter file), which a reopen reads as "not written
// yet": never as entries, never as damage, in the tail or in a sealed
// segment; and the log goes on writing over them.
func TestPowerLossPreallocatedTail(t *testing.T) {
	opts := []wal.Option{wal.WithPrealloc(16 << 10), wal.WithSegmentSize(96 << 10)}
	powerLossPoints(t, opts, func(l *wal.Log, m *logModel) {
		a := uint64(1)
		for k := uint64(0); a < 80; k++ {
			n := 1 + k%5
			m.store(l, a, a+n-1, 1, k%3 == 1)
			a += n
		}
		settle(t, l, m)
	})
}

// Compaction: a first-index mark made durable, then whole segments below
// it removed and the directory synced. A removal the loss undoes brings a
// segment back: the reopened log still opens, never starts below the
// first index of a compaction that returned, and whatever it serves is
// what was written.
func TestPowerLossCompaction(t *testing.T) {
	opts := []wal.Option{wal.WithSegmentSize(32 << 10)}
	powerLossPoints(t, opts, func(l *wal.Log, m *logModel) {
		for a := uint64(1); a <= 60; a += 5 {
			m.store(l, a, a+4, 1, false)
		}
		m.deleteRange(l, 1, 30)
		m.store(l, 61, 70, 1, false)
		m.deleteRange(l, 1, 52)
		m.store(l, 71, 75, 1, true)
		m.deleteRange(l, 1, 60)
		m.store(l, 76, 80, 1, false)
	})
}

// The commit floor: with every batch, in every segment header, and in a
// floor mark (SyncFloor). A floor PersistedFloor reported survives; a
// floor raised and not yet synced may be lost; the reopened floor is never
// above what the log was given, nor above its last entry.
func TestPowerLossCommitFloor(t *testing.T) {
	opts := []wal.Option{wal.WithSegmentSize(32 << 10)}
	powerLossPoints(t, opts, func(l *wal.Log, m *logModel) {
		m.bindFloor(l, 0)
		m.store(l, 1, 10, 1, false)
		m.setFloor(5)
		m.store(l, 11, 20, 1, false)
		m.setFloor(15)
		m.syncFloor(l)
		m.setFloor(18)
		m.store(l, 21, 30, 1, true)
		m.store(l, 31, 35, 1, false)
		m.setFloor(33)
		m.syncFloor(l)
		m.setFloor(35) // raised, never synced
	})
}

// Suffix truncation: a new segment whose base is the cut, made durable
// (header fsync, directory fsync) before the superseded segments are
// removed. Once DeleteRange returned, the cut entries never come back, not
// even when the loss undoes their segments' removal.
func TestPowerLossTruncation(t *testing.T) {
	opts := []wal.Option{wal.WithSegmentSize(32 << 10)}
	powerLossPoints(t, opts, func(l *wal.Log, m *logModel) {
		for a := uint64(1); a <= 40; a += 5 {
			m.store(l, a, a+4, 1, false)
		}
		m.deleteRange(l, 25, 40)
		m.store(l, 25, 34, 2, false)
		m.deleteRange(l, 30, 34)
		m.store(l, 30, 37, 3, true)
		m.store(l, 38, 40, 3, false)
		m.deleteRange(l, 39, 40)
	})
}

// Open creates the log's directory (and its missing parents) when it is
// not there: a member's first start. Those creations must be durable before
// anything in the directory is acknowledged, or a power loss takes the
// whole log away — acknowledged entries, and the term and vote in
// stable.db with them.
func TestPowerLossKeepsTheDirectoryOpenCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "log")
	ffs := faultfs.New(wal.OSFS{})
	l, err := wal.Open(dir, wal.WithFS(ffs))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(ftBatch(1, 8)); err != nil {
		t.Fatal(err)
	}
	if err := ffs.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the log's directory after the loss: %v", err)
	}
	reopenCheck(t, dir, 8)
}
