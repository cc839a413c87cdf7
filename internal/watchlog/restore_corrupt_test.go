package watchlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// The controller's state machine (this recorder over fsm.Jobs) restored
// from a snapshot store whose artifact is corrupt on disk: the store's
// reader hands out all but the artifact's final bytes and then fails
// (snapshot.ErrGateRejected), or the state machine's own checks fail
// first. Either way the restore fails and replaces nothing: the jobs, the
// digest, the applied index, the event history and its waiters are the
// ones before.
func TestRestoreFromACorruptArtifactReplacesNothing(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(r *Recorder, index uint64, jobs []fsm.NewJob) {
		t.Helper()
		b, err := fsm.EncodeCommand(&fsm.SubmitCmd{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		r.Apply(raft.Entry{Index: index, Term: 1, Time: at, Cmd: b})
	}
	// The snapshot: 2,000 jobs, well past the reader's withheld tail.
	src := New(100, 1<<20)
	for b := range 20 {
		var jobs []fsm.NewJob
		for i := range 100 {
			jobs = append(jobs, fsm.NewJob{ID: fmt.Sprintf("s%d-%d", b, i), Queue: "q", Kind: "k", Payload: make([]byte, 100)})
		}
		apply(src, uint64(b+1), jobs)
	}
	store, err := snapshot.Open(t.TempDir(), snapshot.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(1, 20, 1, hraft.Configuration{Servers: []hraft.Server{{ID: "m0", Address: "a"}}}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	art := filepath.Join(store.Dir(), sink.ID(), "state.bin")
	good, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size < 4*64<<10 {
		t.Fatalf("artifact of %d bytes: too small to test", meta.Size)
	}

	for _, c := range []struct {
		name string
		off  int64
		gate bool // the store's reader refuses (the flip is in the withheld tail)
	}{
		{"flip near the start", 100, false},
		{"flip in the middle", meta.Size / 2, false},
		{"flip in the last bytes", meta.Size - 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[c.off] ^= 0x04
			if err := os.WriteFile(art, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := New(100, 1<<20)
			apply(dst, 7, []fsm.NewJob{{ID: "keep", Queue: "z", Kind: "k"}})
			digest, last := dst.Digest(), dst.last
			done, stop := dst.Finished("keep")
			defer stop()

			_, rc, err := store.Open(sink.ID())
			if err != nil {
				t.Fatalf("Open: %v (the length is right: it must return a reader)", err)
			}
			defer rc.Close()
			err = dst.Restore(rc)
			if err == nil {
				t.Fatal("restored from a corrupt artifact")
			}
			if c.gate && !errors.Is(err, snapshot.ErrGateRejected) {
				t.Fatalf("restore failed with %v, want the store's refusal", err)
			}
			if !errors.Is(err, snapshot.ErrGateRejected) && !fsm.IsCorrupt(err) {
				t.Fatalf("restore failed with %v, want a corruption", err)
			}
			if dst.Digest() != digest || dst.last != last || dst.Jobs().Len() != 1 || dst.Jobs().AppliedIndex() != 7 {
				t.Fatalf("a failed restore changed the state: digest equal %v, last %d (was %d), %d jobs, applied %d",
					dst.Digest() == digest, dst.last, last, dst.Jobs().Len(), dst.Jobs().AppliedIndex())
			}
			if _, ok := dst.Jobs().Get("keep"); !ok {
				t.Fatal("the job before the restore is gone")
			}
			select {
			case <-done:
				t.Fatal("a failed restore woke a waiter")
			default:
			}
		})
	}
	// The intact artifact restores.
	if err := os.WriteFile(art, good, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := New(100, 1<<20)
	_, rc, err = store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := dst.Restore(rc); err != nil || dst.Digest() != src.Digest() {
		t.Fatalf("restore of the intact artifact: %v (digest equal %v)", err, dst.Digest() == src.Digest())
	}
}
