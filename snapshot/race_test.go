package snapshot

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// cowState is one immutable version of a toy state machine: applying an
// entry builds a new version, so a snapshot can persist a version while
// later applies continue (the contract of raft.StateMachine.Snapshot).
type cowState struct {
	index uint64
	vals  []uint64
}

const cowWidth = 64

// applyCOW returns the state after applying entry i to s.
func applyCOW(s *cowState, i uint64) *cowState {
	next := &cowState{index: i, vals: slices.Clone(s.vals)}
	next.vals[i%cowWidth] += i * i
	return next
}

// expectedAt is the naive reference: the state at index n from scratch.
func expectedAt(n uint64) []uint64 {
	vals := make([]uint64, cowWidth)
	for i := uint64(1); i <= n; i++ {
		vals[i%cowWidth] += i * i
	}
	return vals
}

// persist writes s the way an FSM snapshot would: in small pieces, so that
// the writer interleaves with applies.
func persist(w io.Writer, s *cowState) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s.index)
	if _, err := w.Write(b[:]); err != nil {
		return err
	}
	for _, v := range s.vals {
		binary.BigEndian.PutUint64(b[:], v)
		if _, err := w.Write(b[:]); err != nil {
			return err
		}
	}
	return nil
}

func decodeCOW(b []byte) (uint64, []uint64, error) {
	if len(b) != 8*(cowWidth+1) {
		return 0, nil, fmt.Errorf("artifact is %d bytes", len(b))
	}
	vals := make([]uint64, cowWidth)
	for i := range vals {
		vals[i] = binary.BigEndian.Uint64(b[8*(i+1):])
	}
	return binary.BigEndian.Uint64(b), vals, nil
}

// Applies racing a snapshot never make an artifact differ from its manifest:
// one goroutine applies entries while another persists point-in-time
// versions into sinks. Every sealed artifact must match its manifest and
// decode to exactly the state at its index. Run with -race.
func TestAppliesRacingSnapshotsNeverDifferFromManifest(t *testing.T) {
	h := newHarness(t, WithRetain(1000))
	var cur atomic.Pointer[cowState]
	cur.Store(&cowState{vals: make([]uint64, cowWidth)})

	const maxEntries, snapshots = 5_000_000, 30
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Add(1)
	go func() { // the apply goroutine
		defer wg.Done()
		for i := uint64(1); i <= maxEntries && !stop.Load(); i++ {
			cur.Store(applyCOW(cur.Load(), i))
		}
	}()

	sealed := map[string]uint64{} // id -> index
	raced := 0                    // snapshots during which applies moved the state on
	errs := make(chan error, 1)
	wg.Add(1)
	go func() { // the snapshot goroutine
		defer wg.Done()
		defer stop.Store(true)
		for len(sealed) < snapshots {
			s := cur.Load()
			if s.index == 0 {
				runtime.Gosched()
				continue
			}
			sk, err := h.s.Create(1, s.index, 1, testConfiguration(), 1, nil)
			if err != nil {
				errs <- err
				return
			}
			if err := persist(sk, s); err != nil {
				_ = sk.Cancel()
				errs <- err
				return
			}
			if err := sk.Close(); err != nil {
				errs <- fmt.Errorf("Close of snapshot at %d: %w", s.index, err)
				return
			}
			if cur.Load().index != s.index {
				raced++
			}
			sealed[sk.ID()] = s.index
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if len(sealed) < 10 {
		t.Fatalf("only %d snapshots sealed", len(sealed))
	}
	if len(h.ev.of(Rejected)) != 0 {
		t.Fatalf("gate rejected %d candidates", len(h.ev.of(Rejected)))
	}
	for id, index := range sealed {
		// Independently of Store.Open: the manifest on disk against the
		// artifact on disk.
		dir := filepath.Join(h.dir, id)
		mb, err := os.ReadFile(filepath.Join(dir, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeManifest(mb)
		if err != nil {
			t.Fatal(err)
		}
		size, digest, err := digestFile(OSFS{}, filepath.Join(dir, artifactName))
		if err != nil || size != m.Size || digest != m.Digest || m.Index != index {
			t.Fatalf("snapshot %s: artifact %d bytes %x, manifest %d bytes %x index %d (want %d), err %v",
				id, size, digest, m.Size, m.Digest, m.Index, index, err)
		}
		// Through the store, and against the naive reference state.
		gotIndex, vals, err := decodeCOW(h.read(id))
		if err != nil {
			t.Fatalf("snapshot %s: %v", id, err)
		}
		if gotIndex != index || !slices.Equal(vals, expectedAt(index)) {
			t.Fatalf("snapshot %s decodes to index %d, not the state at %d", id, gotIndex, index)
		}
	}
	if raced < snapshots/2 {
		t.Fatalf("only %d of %d snapshots overlapped applies", raced, len(sealed))
	}
	t.Logf("%d snapshots, %d overlapped applies", len(sealed), raced)
}
