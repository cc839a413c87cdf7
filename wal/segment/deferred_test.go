package segment_test

// Deferred appends (StoreLogsDeferred): part of the log at once, durable
// only after the writer's fsync (Durable says when), checked by the guard
// exactly as StoreLogs, made durable before any other write, written in
// groups (one write and one fsync for everything waiting), and failing the
// log on a write or sync error like StoreLogs.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// awaitDurable polls the log's Durable through DurableChanged until it
// reaches want, or fails the test at the deadline.
func awaitDurable(t *testing.T, l *wal.Log, want uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := l.DurableChanged()
		if l.Durable() >= want {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("durable %d, want %d", l.Durable(), want)
		}
	}
}

// awaitHeld waits until n Syncs wait for a HoldSyncs release.
func awaitHeld(t *testing.T, ffs *faultfs.FS, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ffs.HeldSyncs() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d syncs held, want %d", ffs.HeldSyncs(), n)
		}
		time.Sleep(time.Millisecond) // polling the fault FS's counter
	}
}

func openFault(t *testing.T, dir string) (*wal.Log, *faultfs.FS) {
	t.Helper()
	ffs := faultfs.New(wal.OSFS{})
	l, err := wal.Open(dir, wal.WithFS(ffs))
	if err != nil {
		t.Fatal(err)
	}
	return l, ffs
}

func reopenCheck(t *testing.T, dir string, last uint64) {
	t.Helper()
	l, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ftCheck(t, l, last)
}

func TestDeferredIsReadableAtOnceAndDurableAfterItsSync(t *testing.T) {
	dir := t.TempDir()
	l, ffs := openFault(t, dir)
	if err := l.StoreLogs(ftBatch(1, 16)); err != nil {
		t.Fatal(err)
	}
	if got := l.Durable(); got != 16 {
		t.Fatalf("durable after StoreLogs: %d, want 16", got)
	}
	release := ffs.HoldSyncs()
	defer release()
	if err := l.StoreLogsDeferred(ftBatch(17, 32)); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, ffs, 1) // the writer is in its fsync of 17..32
	if err := l.StoreLogsDeferred(ftBatch(33, 48)); err != nil {
		t.Fatal(err)
	}
	if last, _ := l.LastIndex(); last != 48 {
		t.Fatalf("last index %d, want 48: a deferred batch is in the log at once", last)
	}
	ftCheck(t, l, 48) // every entry readable, from memory where not written
	if got := l.Durable(); got != 16 {
		t.Fatalf("durable %d while the fsync is held, want 16", got)
	}
	before := ffs.Syncs()
	release()
	awaitDurable(t, l, 48)
	if got := ffs.Syncs() - before; got > 2 {
		t.Fatalf("%d fsyncs for two batches, the second waiting during the first's: want at most 2", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenCheck(t, dir, 48)
}

// Batches that arrive while the writer syncs are written together: one
// write and one fsync for all of them.
func TestDeferredBatchesWaitingAreSyncedTogether(t *testing.T) {
	l, ffs := openFault(t, t.TempDir())
	defer l.Close()
	if err := l.StoreLogs(ftBatch(1, 4)); err != nil {
		t.Fatal(err)
	}
	release := ffs.HoldSyncs()
	defer release()
	if err := l.StoreLogsDeferred(ftBatch(5, 8)); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, ffs, 1)
	for a := uint64(9); a <= 88; a += 4 {
		if err := l.StoreLogsDeferred(ftBatch(a, a+3)); err != nil {
			t.Fatal(err)
		}
	}
	before := ffs.Syncs()
	release()
	awaitDurable(t, l, 88)
	if got := ffs.Syncs() - before; got != 2 {
		t.Fatalf("%d fsyncs for 21 deferred batches (1 syncing, 20 waiting): want 2", got)
	}
	if got := l.Syncs(); got != 3 {
		t.Fatalf("Syncs() = %d after one synchronous batch and 21 deferred ones synced twice: want 3", got)
	}
	ftCheck(t, l, 88)
}

func TestDeferredRefusedByTheGuardChangesNothing(t *testing.T) {
	l, _ := openFault(t, t.TempDir())
	defer l.Close()
	if err := l.StoreLogs(ftBatch(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogsDeferred(ftBatch(11, 20)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		entries []*raft.Log
		want    error
	}{
		{"gap", ftBatch(22, 25), wal.ErrNotContiguous},
		{"overwrite of a deferred entry", ftBatch(20, 21), wal.ErrOverwrite},
		{"zero term", []*raft.Log{{Index: 21, Term: 0, Type: raft.LogNoop}}, wal.ErrZeroTerm},
	}
	for _, c := range cases {
		if err := l.StoreLogsDeferred(c.entries); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		if last, _ := l.LastIndex(); last != 20 {
			t.Fatalf("%s: last index %d after a refusal, want 20", c.name, last)
		}
	}
	awaitDurable(t, l, 20)
	ftCheck(t, l, 20)
}

// Every other write first makes what waits durable: a synchronous append
// returns with everything before it on disk, a truncation cuts deferred
// entries that are on disk first, Close leaves them on disk.
func TestWritesAfterDeferredMakeItDurableFirst(t *testing.T) {
	t.Run("StoreLogs", func(t *testing.T) {
		dir := t.TempDir()
		l, ffs := openFault(t, dir)
		if err := l.StoreLogs(ftBatch(1, 8)); err != nil {
			t.Fatal(err)
		}
		release := ffs.HoldSyncs()
		defer release() // before Close, which waits for the writer
		if err := l.StoreLogsDeferred(ftBatch(9, 16)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- l.StoreLogs(ftBatch(17, 24)) }()
		awaitHeld(t, ffs, 1)
		select {
		case err := <-done:
			t.Fatalf("StoreLogs returned (%v) while the deferred batch before it was not synced", err)
		default:
		}
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := l.Durable(); got != 24 {
			t.Fatalf("durable %d after StoreLogs returned, want 24", got)
		}
		l.Close()
		reopenCheck(t, dir, 24)
	})
	t.Run("DeleteRange", func(t *testing.T) {
		dir := t.TempDir()
		l, _ := openFault(t, dir)
		if err := l.StoreLogs(ftBatch(1, 8)); err != nil {
			t.Fatal(err)
		}
		if err := l.StoreLogsDeferred(ftBatch(9, 24)); err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteRange(17, 24); err != nil {
			t.Fatal(err)
		}
		if got, last := l.Durable(), lastIndex(l); got != 16 || last != 16 {
			t.Fatalf("after the truncation: durable %d, last %d, want 16 and 16", got, last)
		}
		if err := l.StoreLogsDeferred(ftBatch(17, 20)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		reopenCheck(t, dir, 20)
	})
	t.Run("Close", func(t *testing.T) {
		dir := t.TempDir()
		l, _ := openFault(t, dir)
		if err := l.StoreLogs(ftBatch(1, 8)); err != nil {
			t.Fatal(err)
		}
		for a := uint64(9); a < 200; a += 10 {
			if err := l.StoreLogsDeferred(ftBatch(a, a+9)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reopenCheck(t, dir, 208)
	})
}

func lastIndex(l *wal.Log) uint64 { last, _ := l.LastIndex(); return last }

// A failed fsync of the writer fails the log: Durable stays where the disk
// is, every later write says ErrFailed, and a reopened log holds everything
// that was durable and all or none of each batch after it.
func TestDeferredWriterFailureFailsTheLog(t *testing.T) {
	for _, fault := range []string{"fsync error", "write error"} {
		t.Run(fault, func(t *testing.T) {
			dir := t.TempDir()
			l, ffs := openFault(t, dir)
			if err := l.StoreLogs(ftBatch(1, 16)); err != nil {
				t.Fatal(err)
			}
			ch := l.DurableChanged()
			if fault == "fsync error" {
				ffs.FailSyncs(syscall.EIO)
			} else {
				ffs.FailWrites(syscall.EIO)
			}
			if err := l.StoreLogsDeferred(ftBatch(17, 32)); err != nil {
				t.Fatalf("deferred append: %v (the writer fails later)", err)
			}
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("the writer's failure was not signalled")
			}
			if l.Failure() == "" {
				t.Fatal("the log did not fail")
			}
			if got := l.Durable(); got != 16 {
				t.Fatalf("durable %d after the failed sync, want 16", got)
			}
			if err := l.StoreLogs(ftBatch(33, 40)); !errors.Is(err, wal.ErrFailed) {
				t.Fatalf("StoreLogs after the failure: %v, want ErrFailed", err)
			}
			if err := l.StoreLogsDeferred(ftBatch(33, 40)); !errors.Is(err, wal.ErrFailed) {
				t.Fatalf("StoreLogsDeferred after the failure: %v, want ErrFailed", err)
			}
			l.Close()
			ffs.FailSyncs(nil)
			ffs.FailWrites(nil)
			r, err := wal.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			last := lastIndex(r)
			if last != 16 && last != 32 {
				t.Fatalf("reopened with last index %d: want 16 or 32 (all or none of the failed batch)", last)
			}
			ftCheck(t, r, last)
		})
	}
}

// Readers run while deferred batches are appended and written (run with
// -race): every entry read is the one stored.
func TestDeferredConcurrentReaders(t *testing.T) {
	l, _ := openFault(t, t.TempDir())
	defer l.Close()
	if err := l.StoreLogs(ftBatch(1, 10)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				last := lastIndex(l)
				for i := max(last, 10) - 9; i <= last; i++ {
					var e raft.Log
					if err := l.GetLog(i, &e); err != nil || e.Index != i {
						errs <- fmt.Errorf("read %d: %v (index %d)", i, err, e.Index)
						return
					}
				}
			}
		}()
	}
	for a := uint64(11); a < 3000; a += 7 {
		if err := l.StoreLogsDeferred(ftBatch(a, a+6)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	awaitDurable(t, l, lastIndex(l))
	ftCheck(t, l, lastIndex(l))
}

// Close makes what deferred appends left durable, and says so only if it
// did: a log whose writer failed with entries waiting returns ErrFailed
// from Close, and so does a log that failed before it (its floor mark is
// not written either).
func TestCloseOfAFailedLogSaysItFailed(t *testing.T) {
	l, ffs := openFault(t, t.TempDir())
	if err := l.StoreLogs(ftBatch(1, 8)); err != nil {
		t.Fatal(err)
	}
	release := ffs.HoldSyncs()
	if err := l.StoreLogsDeferred(ftBatch(9, 16)); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, ffs, 1)
	if err := l.StoreLogsDeferred(ftBatch(17, 24)); err != nil { // waits in memory
		t.Fatal(err)
	}
	ffs.FailSyncs(syscall.EIO)
	release()
	if err := l.Close(); !errors.Is(err, wal.ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close with deferred entries it could not make durable: %v, want ErrFailed (EIO)", err)
	}
	if got := l.Durable(); got != 8 {
		t.Fatalf("durable %d after the failed close, want 8", got)
	}
}

// deferredFloorEnv names the data dir of TestDeferredFramesPersistTheFloor's
// child process.
const deferredFloorEnv = "JOBRAFT_WAL_DEFERRED_FLOOR_DIR"

// Deferred batches carry the commit floor in their frame like synchronous
// ones. A child process stores deferred batches under a raised floor, waits
// until they are durable and is SIGKILLed, never calling Close (which would
// persist the floor on its own); the log reopened from its directory has
// the floor they were stored under.
func TestDeferredFramesPersistTheFloor(t *testing.T) {
	if dir := os.Getenv(deferredFloorEnv); dir != "" {
		deferredFloorChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeferredFramesPersistTheFloor$", "-test.count=1")
	cmd.Env = append(os.Environ(), deferredFloorEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	hold, err := cmd.StdinPipe() // never written: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	said := ""
	for lines.Scan() {
		if said = lines.Text(); strings.HasPrefix(said, "child: ") {
			break
		}
	}
	if said != "child: durable 48 floor 32" {
		t.Fatalf("the child said %q, want %q", said, "child: durable 48 floor 32")
	}
	// A crash: the child never calls Close.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child ended with %v, want killed", err)
	}

	r, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ftCheck(t, r, 48)
	if pf, f := r.PersistedFloor(), r.Floor(); pf != 32 || f != 32 {
		t.Fatalf("reopened after a kill: persisted floor %d, floor %d; want 32, what the deferred batches were stored under", pf, f)
	}
}

// deferredFloorChild stores [1,16] synchronously (a deferred batch never
// starts a segment), then [17,32] and [33,48] deferred under floors 16 and
// 32, waits until they are durable, says so and waits to be killed (on
// its stdin, which the parent never writes).
func deferredFloorChild(dir string) {
	say := func(format string, args ...any) {
		if _, err := os.Stdout.WriteString("child: " + fmt.Sprintf(format, args...) + "\n"); err != nil {
			os.Exit(4)
		}
	}
	l, err := wal.Open(dir)
	if err != nil {
		say("open: %v", err)
		os.Exit(3)
	}
	var floor atomic.Uint64
	l.SetCommitFloor(floor.Load)
	for _, b := range []struct{ a, z, floor uint64 }{{1, 16, 0}, {17, 32, 16}, {33, 48, 32}} {
		floor.Store(b.floor)
		store := l.StoreLogsDeferred
		if b.a == 1 {
			store = l.StoreLogs
		}
		if err := store(ftBatch(b.a, b.z)); err != nil {
			say("store [%d,%d]: %v", b.a, b.z, err)
			os.Exit(3)
		}
	}
	for {
		ch := l.DurableChanged()
		if l.Durable() >= 48 {
			break
		}
		<-ch
	}
	say("durable %d floor %d", l.Durable(), l.PersistedFloor())
	_, _ = os.Stdin.Read(make([]byte, 1)) // until killed; never Close
	os.Exit(5)                            // the parent went away
}
