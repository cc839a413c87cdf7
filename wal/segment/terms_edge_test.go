package segment_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// The term index never answers a wrong term (ok == true with another term
// than the history the log now continues), also where the log learns of a
// new history other than by a reset: cases a review found.

// hashicorp/raft resets the log after an install with removeOldLogs, which
// calls compactLogsWithTrailing(last, last, 0): on an EMPTY log (last 0) it
// returns before any DeleteRange, so the wal sees nothing. A log that
// adopted a term index for an install at S1 and received no entry yet keeps
// that list through a second install at S2 > S1 that is not followed by an
// adoption (the sender could not answer — an old version, a sender that
// itself does not know its terms through S2 — or the process died between
// raft's install and the Answered hook). Once raft appends from S2+1, the
// list answers for (S1, S2], where the log never learned anything.
func TestTermIndexAdoptedListEndsWithALaterInstallOnAnEmptyLog(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "no adoption"
		if crash {
			name = "killed before the adoption"
		}
		t.Run(name, func(t *testing.T) {
			tl := openTermsLog(t)
			tl.store(1, 30, 2)
			tl.del(1, 30) // raft's reset after the install at 100
			// The first install's sender: term 2 through 100.
			if err := tl.l.AdoptTerms(100, 2, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 2}}}); err != nil {
				t.Fatal(err)
			}
			// The second install, at 200, of a history in which term 3
			// began at 150. raft's removeOldLogs on the empty log: no
			// DeleteRange at all (DeleteRange(0, 0) would be a no-op too).
			tl.del(0, 0)
			if crash {
				tl.reopen()
			}
			// The leader replicates from 201 on.
			tl.store(201, 205, 3)
			if got, ok := tl.l.TermAt(160); ok {
				t.Fatalf("TermAt(160) = %d, known; the log never learned the term there (the second snapshot's history has term 3)", got)
			}
			if got, ok := tl.l.TermAt(200); ok {
				t.Fatalf("TermAt(200) = %d, known; the log never learned the term of the second snapshot's last entry", got)
			}
			if got := tl.l.TermStarts(200); got.Known != 0 {
				t.Fatalf("TermStarts(200) = %+v: answers jr.terms for a history it does not hold", got)
			}
		})
	}
}

// The chaos harness's lying disk (internal/test/clustertest/ctlfaults.go, isSegment)
// checkpoints and restores only the *.seg files: stable.db, which now
// holds the term index, keeps what was written during the lie. A member
// that installs a snapshot during the lie (reset, AdoptTerms) comes back
// with its pre-lie segments and the adopted list (through S): loadTerms
// keeps through = S above the log's last index, so the log answers terms
// for indexes it does not hold, with its own last term instead of the
// snapshot's.
func TestTermIndexRestoredSegmentsWithANewerStoredList(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 50, 2) // the log when the lie begins
	tl.l.Close()
	cp := t.TempDir()
	copySegs(t, tl.dir, cp)
	tl.l = nil
	tl.reopen()
	// During the lie: raft installs a snapshot at 100 (term 3 from 60).
	tl.del(1, 50)
	if err := tl.l.AdoptTerms(100, 3, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 2}, {60, 3}}}); err != nil {
		t.Fatal(err)
	}
	tl.l.Close()
	tl.l = nil
	// The power loss: the segments as they were, stable.db as it is.
	names, _ := os.ReadDir(tl.dir)
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".seg") {
			os.Remove(filepath.Join(tl.dir, n.Name()))
		}
	}
	copySegs(t, cp, tl.dir)
	tl.reopen()
	if last, _ := tl.l.LastIndex(); last != 50 {
		t.Fatalf("last %d after the restore, want 50", last)
	}
	for _, i := range []uint64{70, 100} {
		if got, ok := tl.l.TermAt(i); ok {
			t.Fatalf("TermAt(%d) = %d, known: past the log's last entry 50 (and the adopted list says 3)", i, got)
		}
	}
}

func copySegs(t *testing.T, from, to string) {
	t.Helper()
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".seg") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// After AdoptTerms the log is empty and its shape's last term is 0, so the
// guard accepts a first entry of any term; one below the snapshot's term
// starts nothing in the list (note adds a start only for a higher term),
// and the log then answers the snapshot's term for it. Only a misbehaving
// leader sends that, but the wal's promise is "never a wrong term".
func TestTermIndexFirstEntryBelowTheAdoptedTerm(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 30, 2)
	tl.del(1, 30)
	if err := tl.l.AdoptTerms(100, 6, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 2}, {90, 6}}}); err != nil {
		t.Fatal(err)
	}
	err := tl.l.StoreLogs([]*raft.Log{crashEntry(101, 3)})
	if err != nil {
		return // refused: fine
	}
	if got, ok := tl.l.TermAt(101); ok && got != 3 {
		t.Fatalf("entry 101 has term 3, TermAt(101) = %d", got)
	}
}

// Repair that cuts the whole log (damage in the first segment's header:
// that segment and every later one go) leaves an empty log, and loadTerms
// then takes the stored list whole, although it only covers the starts
// below the first index of the last compaction that stored it. The
// entries between that point and wherever raft next appends (its snapshot
// may be far later) are never noted: a term that began there is missed.
func TestTermIndexRepairToAnEmptyLog(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 40, 1)
	tl.store(41, 80, 2)
	tl.del(1, 50) // stores [(1,1), (41,2)]
	tl.store(81, 120, 3)
	tl.l.Close()
	tl.l = nil
	segs, _ := os.ReadDir(tl.dir)
	var first string
	for _, n := range segs {
		if strings.HasSuffix(n.Name(), ".seg") {
			first = n.Name()
			break
		}
	}
	f, err := os.OpenFile(filepath.Join(tl.dir, first), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 8) // the header
	f.Close()
	l, err := wal.Open(tl.dir, wal.Repair(), wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	tl.l = l
	if last, _ := l.LastIndex(); last != 0 {
		t.Fatalf("repair kept [.., %d]; the test wants it to cut the whole log", last)
	}
	// raft restores its snapshot at 200 and the leader appends from 201.
	tl.store(201, 205, 4)
	if got, ok := l.TermAt(150); ok && got != 3 {
		t.Fatalf("TermAt(150) = %d, known; entry 150 had term 3 (the stored list only covered below 51)", got)
	}
	tl.reopen() // the stored list Open did not use is gone for good
	tl.want("after an append and a reopen", 201, rep(4, 5)...)
}

// ForgetTerms, after an install whose sender's list was not adopted: the
// log answers nothing at or below the snapshot, before or after the next
// append and across reopening; it is refused while the log holds an entry
// at or below the index. TermsThrough names the adopted snapshot only
// while the log is empty.
func TestTermIndexForget(t *testing.T) {
	tl := openTermsLog(t)
	tl.store(1, 30, 2)
	tl.del(1, 30)
	if err := tl.l.AdoptTerms(100, 2, segment.TermList{Known: 1, Starts: []segment.TermStart{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	if got := tl.l.TermsThrough(); got != 100 {
		t.Fatalf("TermsThrough = %d, want 100", got)
	}
	if err := tl.l.ForgetTerms(200); err != nil {
		t.Fatal(err)
	}
	tl.want("forgotten", 201) // nothing known
	tl.reopen()
	tl.want("forgotten, reopened", 201)
	tl.store(201, 205, 3)
	if got := tl.l.TermsThrough(); got != 0 {
		t.Fatalf("TermsThrough with entries = %d, want 0", got)
	}
	tl.reopen()
	tl.want("appended, reopened", 201, rep(3, 5)...)
	if err := tl.l.ForgetTerms(203); !errors.Is(err, wal.ErrBadTerms) {
		t.Fatalf("ForgetTerms below the log's entries = %v, want ErrBadTerms", err)
	}
	tl.want("refused", 201, rep(3, 5)...)
}
