package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
)

// adapter is the hashicorp/raft BatchingFSM over an StateMachine. It
// records the index of the last entry the state machine has really applied
// (hashicorp/raft's AppliedIndex moves when entries are handed to the FSM
// goroutine, before they are applied). With an observer it reports what
// it hands the state machine (Wiring.Applied).
type adapter struct {
	sm      StateMachine
	applied atomic.Uint64
	obs     AppliedObserver // nil: none
	// gate, when set, returns once the log is durable through an index
	// (true), or false when it never will be: the log failed (durable.go).
	gate func(index uint64) bool
	// broken is set once a batch was not applied: every later batch is
	// refused too, and no snapshot is taken, so the state machine never
	// holds a later entry without an earlier one (the member must reopen).
	broken atomic.Bool
	// bytes counts the data bytes applied and marks them at snapshot
	// points, for the snapshot cadence (cadence.go).
	bytes byteMarks
	// taking counts the snapshots taken and not yet released (persisted,
	// or failed): while one is, the cadence asks for none (cadence.go).
	taking atomic.Int32

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever applied moves
}

var (
	_ hraft.BatchingFSM = (*adapter)(nil)
)

func newAdapter(sm StateMachine, obs AppliedObserver) *adapter {
	a := &adapter{sm: sm, obs: obs, changed: make(chan struct{})}
	a.bytes.restored(0) // the empty state: every entry applied counts
	return a
}

// errNotDurable answers entries the state machine did not apply because
// the member's log failed before it held them (adapter.gate).
var errNotDurable = errors.New("raft: entry not applied: the member's log failed before it held it")

// applyResult is what Apply returns through raft's future.
type applyResult struct {
	data []byte
	err  error
}

func (a *adapter) Apply(l *hraft.Log) interface{} {
	return a.ApplyBatch([]*hraft.Log{l})[0]
}

func (a *adapter) ApplyBatch(logs []*hraft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	if a.broken.Load() || (len(logs) > 0 && a.gate != nil && !a.gate(logs[len(logs)-1].Index)) {
		// Never durable here (the log failed): nothing is applied or
		// recorded, now or later; a reopened member applies it from the
		// log, or from the leader.
		a.broken.Store(true)
		for i := range out {
			out[i] = applyResult{err: errNotDurable}
		}
		return out
	}
	var last uint64
	for i, l := range logs {
		last = l.Index
		if l.Type != hraft.LogCommand {
			continue
		}
		at, cmd, err := open(l.Data)
		if err != nil {
			// A command without a valid envelope cannot come from a jobraft
			// leader; it changes nothing and is answered as an error.
			out[i] = applyResult{err: fmt.Errorf("index %d: %w", l.Index, err)}
			continue
		}
		out[i] = applyResult{data: a.sm.Apply(Entry{Index: l.Index, Term: l.Term, Time: at, Cmd: cmd})}
	}
	if a.obs != nil && len(logs) > 0 {
		a.obs.Applied(logs)
	}
	a.bytes.add(logs)
	if last != 0 {
		a.setApplied(last)
	}
	return out
}

func (a *adapter) setApplied(i uint64) {
	a.applied.Store(i)
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// wait returns a channel closed at the next change of the applied index.
func (a *adapter) wait() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// Snapshot: the state machine's snapshot, prefixed with the applied index
// so Restore can set it.
func (a *adapter) Snapshot() (hraft.FSMSnapshot, error) {
	if a.broken.Load() {
		return nil, errNotDurable
	}
	s, err := a.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	applied := a.applied.Load()
	a.bytes.mark(applied)
	a.taking.Add(1)
	return &fsmSnapshot{s: s, applied: applied, taking: &a.taking}, nil
}

func (a *adapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var hdr [8]byte
	if _, err := io.ReadFull(rc, hdr[:]); err != nil {
		return fmt.Errorf("raft: snapshot header: %w", err)
	}
	if err := a.sm.Restore(rc); err != nil {
		return err
	}
	idx := binary.LittleEndian.Uint64(hdr[:])
	if a.obs != nil {
		a.obs.Restored(idx)
	}
	a.bytes.restored(idx)
	a.setApplied(idx)
	return nil
}

type fsmSnapshot struct {
	s        Snapshot
	applied  uint64
	taking   *atomic.Int32 // the adapter's count, less one at Release
	released atomic.Bool
}

func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], s.applied)
	if _, err := sink.Write(hdr[:]); err != nil {
		sink.Cancel()
		return err
	}
	if err := s.s.Persist(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release: hashicorp/raft calls it once Persist returned (sealed, or
// failed and canceled).
func (s *fsmSnapshot) Release() {
	if !s.released.Swap(true) {
		s.taking.Add(-1)
	}
	s.s.Release()
}
