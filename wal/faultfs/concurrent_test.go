package faultfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling the FS's counters
	}
}

// A Sync makes durable what the file held when it was called: a write that
// completes while it runs (here: while it is held) is lost with the power.
func TestWriteDuringASyncIsNotSyncedByIt(t *testing.T) {
	h := newPL(t)
	f := h.synced("a", "aaaa")
	h.writeAt(f, 0, "bbbbbbbb")
	release := h.fs.HoldSyncs()
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	waitFor(t, "the Sync to be held", func() bool { return h.fs.HeldSyncs() == 1 })
	h.writeAt(f, 5, "cc")   // below the size the Sync makes durable
	h.writeAt(f, 1, "dd")   // below the size synced before
	h.writeAt(f, 8, "eeee") // past both
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.powerLoss()
	h.want("a=bbbbbbbb")
}

// PowerLoss does not wait for Syncs held by HoldSyncs (which hold the FS's
// operation lock shared): it returns, and the held Sync returns
// ErrPowerLost, never success.
func TestPowerLossWhileSyncsHeld(t *testing.T) {
	h := newPL(t)
	f := h.synced("a", "old")
	h.writeAt(f, 0, "new")
	h.fs.HoldSyncs() // never released
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	waitFor(t, "the Sync to be held", func() bool { return h.fs.HeldSyncs() == 1 })
	lost := make(chan error, 1)
	go func() { lost <- h.fs.PowerLoss() }()
	select {
	case err := <-lost:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("PowerLoss deadlocked on a held Sync")
	}
	if err := <-done; !errors.Is(err, ErrPowerLost) {
		t.Fatalf("the held Sync returned %v, want ErrPowerLost", err)
	}
	waitFor(t, "no Sync held", func() bool { return h.fs.HeldSyncs() == 0 })
	h.want("a=old")
}

// A Sync whose disk flush is under way (stalled) when the power goes
// returns ErrPowerLost, not success.
func TestSyncUnderWayAtPowerLossFails(t *testing.T) {
	h := newPL(t)
	f := h.synced("a", "old")
	h.writeAt(f, 0, "new")
	h.fs.StallNextSync(300 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	waitFor(t, "the Sync to take its stall", func() bool {
		h.fs.mu.Lock()
		defer h.fs.mu.Unlock()
		return h.fs.stall == 0
	})
	h.powerLoss()
	if err := <-done; !errors.Is(err, ErrPowerLost) {
		t.Fatalf("the Sync under way returned %v, want ErrPowerLost", err)
	}
	h.want("a=old")
}

// Writers and syncers race a power loss. Each writer owns a file: records
// appended, a header overwritten with the count, a Sync every third
// record; after the loss its file holds exactly what its last successful
// Sync covered. Two more goroutines share a file, one appending records,
// the other syncing: everything written before a Sync that returned nil was
// called survives, the records form an intact prefix of what was written,
// and nothing else is there. Every operation that failed, failed with
// ErrPowerLost. Run it with -race.
func TestConcurrentWritesRaceAPowerLoss(t *testing.T) {
	h := newPL(t)
	const writers, recSize = 4, 16
	record := func(file, i int) []byte {
		return []byte(fmt.Sprintf("%02d:%012d\n", file, i)) // recSize bytes
	}
	files := make([]*faultFile, writers+1)
	for i := range files {
		files[i] = h.create(fmt.Sprintf("w%d", i)).(*faultFile)
	}
	h.syncDir(".")

	var progress atomic.Int64
	durable := make([]int, writers)
	errs := make(chan error, writers+2)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := files[w]
			var hdr [8]byte
			for i := 0; ; i++ {
				if _, err := f.WriteAt(record(w, i), int64(8+i*recSize)); err != nil {
					errs <- err
					return
				}
				binary.LittleEndian.PutUint64(hdr[:], uint64(i+1))
				if _, err := f.WriteAt(hdr[:], 0); err != nil {
					errs <- err
					return
				}
				progress.Add(1)
				if i%3 == 2 {
					if err := f.Sync(); err != nil {
						errs <- err
						return
					}
					durable[w] = i + 1
				}
			}
		}()
	}
	shared := files[writers]
	var written atomic.Int64 // records of the shared file whose write returned
	var mustSurvive atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			if _, err := shared.WriteAt(record(writers, i), int64(i*recSize)); err != nil {
				errs <- err
				return
			}
			written.Store(int64(i + 1))
		}
	}()
	go func() {
		defer wg.Done()
		for {
			before := written.Load()
			if err := shared.Sync(); err != nil {
				errs <- err
				return
			}
			mustSurvive.Store(max(mustSurvive.Load(), before))
		}
	}()
	waitFor(t, "the writers to make progress", func() bool { return progress.Load() >= 200 && mustSurvive.Load() > 0 })
	h.powerLoss()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrPowerLost) {
			t.Errorf("an operation racing the power loss failed with %v, want ErrPowerLost", err)
		}
	}
	for w := range writers {
		b, err := os.ReadFile(h.path(fmt.Sprintf("w%d", w)))
		if err != nil {
			t.Fatal(err)
		}
		n := durable[w]
		if n == 0 {
			if len(b) != 0 {
				t.Errorf("file %d: %d bytes after the loss, never synced", w, len(b))
			}
			continue
		}
		if len(b) != 8+n*recSize {
			t.Errorf("file %d: %d bytes after the loss, want %d (%d records synced)", w, len(b), 8+n*recSize, n)
			continue
		}
		if got := binary.LittleEndian.Uint64(b[:8]); got != uint64(n) {
			t.Errorf("file %d: header says %d records, want %d", w, got, n)
		}
		for i := range n {
			if !bytes.Equal(b[8+i*recSize:8+(i+1)*recSize], record(w, i)) {
				t.Errorf("file %d: record %d differs after the loss", w, i)
			}
		}
	}
	b, err := os.ReadFile(h.path(fmt.Sprintf("w%d", writers)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%recSize != 0 || int64(len(b)/recSize) < mustSurvive.Load() || int64(len(b)/recSize) > written.Load()+1 {
		t.Fatalf("shared file: %d bytes after the loss; %d records synced, %d written", len(b), mustSurvive.Load(), written.Load())
	}
	for i := range len(b) / recSize {
		if !bytes.Equal(b[i*recSize:(i+1)*recSize], record(writers, i)) {
			t.Fatalf("shared file: record %d differs after the loss", i)
		}
	}
	t.Logf("records synced per writer %v; shared file: %d records kept, %d synced, %d written", durable, len(b)/recSize, mustSurvive.Load(), written.Load())
}
