package segment_test

// The power-loss harness: a log written through a faultfs.FS that loses the
// power just before its n-th change of the disk (PowerLossAt), for every n
// in turn, then
// reopened from the directory and checked against what it acknowledged
// before the loss. A model records what the log was asked to write and what
// it said was durable (a returned StoreLogs, DeleteRange, SyncFloor; the
// values Durable and PersistedFloor reported).

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// logModel is what a log was asked to do and what it acknowledged. Its
// methods do the operation on the log and record it; after the first
// failure (the power went) they do nothing.
type logModel struct {
	mu       sync.Mutex
	failed   error
	cur      map[uint64]uint64          // index → term, the log as written
	possible map[uint64]map[uint64]bool // index → terms that may be on disk there
	acked    map[uint64]uint64          // index → term the log said was durable
	first    uint64                     // the first index a returned compaction set
	floor    uint64                     // the highest PersistedFloor reported
	floorMax uint64                     // the highest floor the log could have written
	src      atomic.Uint64              // the bound floor source, if bound
}

func newLogModel() *logModel {
	return &logModel{cur: map[uint64]uint64{}, possible: map[uint64]map[uint64]bool{}, acked: map[uint64]uint64{}}
}

func entries(a, b, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := a; i <= b; i++ {
		out = append(out, crashEntry(i, term))
	}
	return out
}

func (m *logModel) fail(err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil && err != nil {
		m.failed = err
	}
	return m.failed != nil
}

func (m *logModel) stopped() bool { return m.fail(nil) }

// store appends [a, b] in term, with StoreLogs or StoreLogsDeferred.
func (m *logModel) store(l *wal.Log, a, b, term uint64, deferred bool) {
	if m.stopped() {
		return
	}
	m.mu.Lock()
	for i := a; i <= b; i++ {
		m.cur[i] = term
		if m.possible[i] == nil {
			m.possible[i] = map[uint64]bool{}
		}
		m.possible[i][term] = true
	}
	m.mu.Unlock()
	var err error
	if deferred {
		err = l.StoreLogsDeferred(entries(a, b, term))
	} else {
		err = l.StoreLogs(entries(a, b, term))
	}
	if m.fail(err) {
		return
	}
	if !deferred {
		m.mu.Lock()
		for i := a; i <= b; i++ {
			m.acked[i] = term
		}
		m.mu.Unlock()
	}
	m.observe(l)
}

// deleteRange deletes [a, b]: a prefix (compaction) or a suffix
// (truncation).
func (m *logModel) deleteRange(l *wal.Log, a, b uint64) {
	if m.stopped() {
		return
	}
	first, _ := l.FirstIndex()
	if a <= first {
		m.mu.Lock()
		m.floorMax = max(m.floorMax, b) // an unbound log derives its floor from it
		m.mu.Unlock()
	}
	if m.fail(l.DeleteRange(a, b)) {
		return
	}
	m.mu.Lock()
	if a <= first {
		m.first = b + 1
	} else {
		for i := a; i <= b; i++ {
			delete(m.cur, i)
			delete(m.acked, i)
			delete(m.possible, i) // what was there before may never come back
		}
	}
	m.mu.Unlock()
	m.observe(l)
}

// bindFloor binds the log's floor to the model's source, at v.
func (m *logModel) bindFloor(l *wal.Log, v uint64) {
	m.setFloor(v)
	l.SetCommitFloor(m.src.Load)
}

func (m *logModel) setFloor(v uint64) {
	m.mu.Lock()
	m.floorMax = max(m.floorMax, v)
	m.mu.Unlock()
	m.src.Store(v)
}

func (m *logModel) syncFloor(l *wal.Log) {
	if m.stopped() || m.fail(l.SyncFloor()) {
		return
	}
	m.observe(l)
}

// observe records what the log reports durable: every entry through
// Durable, and PersistedFloor. Only appends may run concurrently with it.
func (m *logModel) observe(l *wal.Log) {
	d, pf := l.Durable(), l.PersistedFloor()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := d; i > 0; i-- {
		t, ok := m.cur[i]
		if !ok || m.acked[i] == t {
			break // below: compacted, or acknowledged before
		}
		m.acked[i] = t
	}
	m.floor = max(m.floor, pf)
}

// check asserts that r, the log reopened after the loss, holds everything
// acknowledged and nothing that was never written there, and returns where
// to continue (index, term).
func (m *logModel) check(t *testing.T, r *wal.Log, where string) (next, term uint64) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	first, _ := r.FirstIndex()
	last, _ := r.LastIndex()
	var acked []uint64
	for i := range m.acked {
		if i >= m.first {
			acked = append(acked, i)
		}
	}
	sort.Slice(acked, func(a, b int) bool { return acked[a] < acked[b] })
	if n := len(acked); n > 0 && last < acked[n-1] {
		t.Fatalf("%s: reopened log ends at %d, but %d was acknowledged durable", where, last, acked[n-1])
	}
	if last > 0 && m.first > 0 && first < m.first {
		t.Fatalf("%s: reopened log starts at %d, below the first index %d a returned compaction made durable", where, first, m.first)
	}
	if last > 0 && first == 0 {
		t.Fatalf("%s: reopened log has last index %d and first index 0", where, last)
	}
	for i := first; i <= last && last > 0; i++ {
		var e raft.Log
		if err := r.GetLog(i, &e); err != nil {
			t.Fatalf("%s: read %d of [%d, %d]: %v", where, i, first, last, err)
		}
		if want, ok := m.acked[i]; ok && e.Term != want {
			t.Fatalf("%s: index %d holds term %d, but term %d was acknowledged durable there", where, i, e.Term, want)
		}
		if !m.possible[i][e.Term] {
			t.Fatalf("%s: index %d holds term %d, never written there since a returned truncation", where, i, e.Term)
		}
		if !bytes.Equal(e.Data, crashEntry(i, e.Term).Data) {
			t.Fatalf("%s: index %d (term %d) holds other data (%d bytes) than was written", where, i, e.Term, len(e.Data))
		}
		term = e.Term
	}
	floor := r.Floor()
	if floor < m.floor {
		t.Fatalf("%s: reopened floor %d is below %d, which PersistedFloor reported", where, floor, m.floor)
	}
	if floor > m.floorMax {
		t.Fatalf("%s: reopened floor %d is above every floor the log was given (%d)", where, floor, m.floorMax)
	}
	if last > 0 && floor > last {
		t.Fatalf("%s: reopened floor %d is above the reopened log's last index %d", where, floor, last)
	}
	next = last + 1
	if last == 0 {
		next = floor + 1
	}
	return next, max(term, 1)
}

// powerLossPoints runs scenario once without a loss to count its changes of
// the disk, then once per change with the power lost just before it (and
// once after the last), each time reopening the log from its directory,
// checking it against the model, and then appending to it and reopening it
// again: the log must go on after any loss.
func powerLossPoints(t *testing.T, opts []wal.Option, scenario func(l *wal.Log, m *logModel)) {
	t.Helper()
	dry := faultfs.New(wal.OSFS{})
	l, err := wal.Open(t.TempDir(), append(opts, wal.WithFS(dry))...)
	if err != nil {
		t.Fatal(err)
	}
	m := newLogModel()
	scenario(l, m)
	if m.failed != nil {
		t.Fatalf("the scenario fails without a power loss: %v", m.failed)
	}
	l.Close()
	total := dry.Changes()
	inside := 0
	for at := int64(1); at <= total+1; at++ {
		dir := t.TempDir()
		ffs := faultfs.New(wal.OSFS{})
		ffs.PowerLossAt(at)
		m := newLogModel()
		l, err := wal.Open(dir, append(opts, wal.WithFS(ffs))...)
		if err == nil {
			scenario(l, m)
		}
		cut, perr := ffs.LostBefore()
		if ffs.Lost() {
			inside++
		} else {
			cut, perr = "after the last change", ffs.PowerLoss()
		}
		if l != nil {
			m.observe(l) // what the log reports after the loss counts too
			_ = l.Close()
		}
		where := fmt.Sprintf("power lost before change %d of %d (%s)", at, total, cut)
		if perr != nil {
			t.Fatalf("%s: PowerLoss: %v", where, perr)
		}
		r, err := wal.Open(dir, opts...)
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		next, term := m.check(t, r, where)
		if err := r.StoreLogs(entries(next, next+4, term)); err != nil {
			t.Fatalf("%s: append [%d, %d] after the reopen: %v", where, next, next+4, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		r, err = wal.Open(dir, opts...)
		if err != nil {
			t.Fatalf("%s: second reopen: %v", where, err)
		}
		if last, _ := r.LastIndex(); last != next+4 {
			t.Fatalf("%s: second reopen ends at %d, want %d", where, last, next+4)
		}
		for i := next; i <= next+4; i++ {
			var e raft.Log
			if err := r.GetLog(i, &e); err != nil || e.Term != term {
				t.Fatalf("%s: second reopen: index %d: %v (term %d, want %d)", where, i, err, e.Term, term)
			}
		}
		r.Close()
	}
	t.Logf("%d changes of the disk; the power lost before each (%d times inside the scenario) and after the last", total, inside)
}
