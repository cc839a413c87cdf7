package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jobraft/jobraft/wal/segment"
	"pgregory.net/rapid"
)

// The rapid model test drives the guard, built into *Log and as middleware
// over raft-boltdb/v2 and raft.InmemStore, with random stores, truncations,
// compactions, floor moves, reads and restarts, and checks every decision
// and the whole log content against a naive model: a map of entries.

type modelEntry struct {
	term uint64
	typ  raft.LogType
	data []byte
}

type model struct {
	entries     map[uint64]modelEntry
	first, last uint64
	fnFloor     uint64 // what the bound floor source says now
	persisted   uint64 // floor made durable
}

func (m *model) floor() uint64 { return max(m.fnFloor, m.persisted) }

func (m *model) lastTerm() uint64 {
	if m.last == 0 {
		return 0
	}
	return m.entries[m.last].term
}

// expectStore is the naive decision for a batch: the sentinel, or nil.
func (m *model) expectStore(batch []*raft.Log, requireStamp bool) error {
	prev, prevTerm := m.last, m.lastTerm()
	for i, e := range batch {
		if e.Index == 0 || e.Term == 0 {
			return ErrZeroTerm
		}
		if i == 0 && m.last == 0 {
			if e.Index <= m.floor() {
				return ErrNotContiguous
			}
		} else if i == 0 && e.Index <= m.last {
			return ErrOverwrite
		} else if e.Index != prev+1 {
			return ErrNotContiguous
		}
		if e.Term < prevTerm {
			return ErrTermRegression
		}
		if s, ok := segment.ParseStamp(e.Extensions); ok {
			if s.Len != uint32(len(e.Data)) || s.CRC != segment.Checksum(e.Data) {
				return ErrPayloadMismatch
			}
		} else if requireStamp && e.Type == raft.LogCommand {
			return ErrUnstamped
		}
		prev, prevTerm = e.Index, e.Term
	}
	return nil
}

// expectDelete is the naive decision for DeleteRange: the sentinel or nil,
// and what happens.
func (m *model) expectDelete(min, max uint64) (string, error) {
	if min > max {
		return "", ErrInvalidRange
	}
	if m.last == 0 || max < m.first || min > m.last {
		return "none", nil
	}
	whole := min <= m.first && max >= m.last
	prefix := min <= m.first
	suffix := max >= m.last
	switch {
	case whole:
		return "reset", nil
	case prefix && max <= m.floor():
		return "compact", nil
	case prefix:
		return "", ErrCommittedTruncate
	case suffix && min > m.floor():
		return "truncate", nil
	case suffix:
		return "", ErrCommittedTruncate
	}
	return "", ErrInvalidRange
}

// subject is one store under test.
type subject struct {
	name         string
	store        raft.LogStore
	floorFn      func(func() uint64)
	restart      func() error
	close        func()
	persistOnDel bool // *Log persists the floor with truncations and resets
	persistClose bool // *Log persists the floor on Close
}

// deferredStore appends through StoreLogsDeferred (what a raft leader's
// dispatch does in jobraft's node).
type deferredStore struct{ *Log }

func (d deferredStore) StoreLogs(entries []*raft.Log) error { return d.Log.StoreLogsDeferred(entries) }
func (d deferredStore) StoreLog(e *raft.Log) error          { return d.StoreLogs([]*raft.Log{e}) }

func newSubject(t *rapid.T, kind, dir string) *subject {
	switch kind {
	case "wal", "wal-deferred":
		s := &subject{name: kind, persistOnDel: true, persistClose: true}
		var l *Log
		open := func() error {
			var err error
			l, err = Open(dir, WithSegmentSize(512), WithCacheSize(4), RequireStamp())
			if err != nil {
				return err
			}
			s.store = l
			if kind == "wal-deferred" {
				s.store = deferredStore{l}
			}
			s.floorFn = l.SetCommitFloor
			return nil
		}
		if err := open(); err != nil {
			t.Fatal(err)
		}
		s.restart = func() error {
			if err := l.Close(); err != nil {
				return err
			}
			return open()
		}
		s.close = func() { l.Close() }
		return s
	case "bolt":
		s := &subject{name: kind}
		var b *raftboltdb.BoltStore
		open := func() error {
			var err error
			b, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "bolt.db")})
			if err != nil {
				return err
			}
			g := NewGuard(b, GuardFloorStore(b), GuardRequireStamp())
			s.store, s.floorFn = g, g.SetCommitFloor
			return nil
		}
		if err := open(); err != nil {
			t.Fatal(err)
		}
		s.restart = func() error {
			if err := b.Close(); err != nil {
				return err
			}
			return open()
		}
		s.close = func() { b.Close() }
		return s
	default:
		s := &subject{name: kind}
		inner := raft.NewInmemStore()
		open := func() error {
			g := NewGuard(inner, GuardFloorStore(inner), GuardRequireStamp())
			s.store, s.floorFn = g, g.SetCommitFloor
			return nil
		}
		open()
		s.restart = open
		s.close = func() {}
		return s
	}
}

func TestGuardModel(t *testing.T) {
	for _, kind := range []string{"wal", "wal-deferred", "bolt", "inmem"} {
		t.Run(kind, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { runModel(rt, kind) })
		})
	}
}

func runModel(t *rapid.T, kind string) {
	dir, err := os.MkdirTemp("", "walmodel")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s := newSubject(t, kind, dir)
	defer func() { s.close() }()
	m := &model{entries: map[uint64]modelEntry{}}
	bind := func() { s.floorFn(func() uint64 { return m.fnFloor }) }
	bind()

	isErr := func(got, want error) bool {
		if want == nil {
			return got == nil
		}
		return errors.Is(got, want)
	}
	checkAll := func(t *rapid.T) {
		first, err := s.store.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := s.store.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		if first != m.first || last != m.last {
			t.Fatalf("%s: log [%d,%d], model [%d,%d]", s.name, first, last, m.first, m.last)
		}
		for i := m.first; i <= m.last && m.last != 0; i++ {
			var e raft.Log
			if err := s.store.GetLog(i, &e); err != nil {
				t.Fatalf("%s: get %d: %v", s.name, i, err)
			}
			want := m.entries[i]
			if e.Index != i || e.Term != want.term || e.Type != want.typ || !bytes.Equal(e.Data, want.data) {
				t.Fatalf("%s: index %d: got term %d len %d, want term %d len %d", s.name, i, e.Term, len(e.Data), want.term, len(want.data))
			}
		}
	}

	t.Repeat(map[string]func(*rapid.T){
		"store": func(t *rapid.T) {
			n := rapid.IntRange(1, 6).Draw(t, "n")
			start := m.last + 1
			if m.last == 0 {
				start = m.floor() + 1
			}
			termBase := max(m.lastTerm(), 1) + uint64(rapid.IntRange(0, 2).Draw(t, "termStep"))
			fault := rapid.SampledFrom([]string{"none", "none", "none", "none", "gap", "overwrite", "zero", "regress", "mismatch", "empty", "unstamped", "noop"}).Draw(t, "fault")
			var batch []*raft.Log
			for k := 0; k < n; k++ {
				idx := start + uint64(k)
				e := &raft.Log{Index: idx, Term: termBase, Type: raft.LogCommand,
					Data: []byte(fmt.Sprintf("%s-%d-%d-%d", kind, idx, termBase, rapid.IntRange(0, 1<<20).Draw(t, "v")))}
				segment.Stamp(e)
				batch = append(batch, e)
			}
			j := rapid.IntRange(0, n-1).Draw(t, "j")
			switch fault {
			case "gap":
				for k := j; k < n; k++ {
					batch[k].Index++
				}
			case "overwrite":
				if m.last > 0 {
					back := uint64(rapid.IntRange(0, int(m.last-m.first)).Draw(t, "back"))
					for k := range batch {
						batch[k].Index = m.last - back + uint64(k)
					}
				}
			case "zero":
				batch[j].Term = 0
			case "regress":
				if termBase > 1 {
					batch[j].Term = termBase - 1
				}
			case "mismatch":
				batch[j].Data = append([]byte(nil), batch[j].Data...)
				batch[j].Data[0] ^= 0xff
			case "empty":
				batch[j].Data = nil
			case "unstamped":
				batch[j].Extensions = nil
			case "noop":
				batch[j].Type = raft.LogNoop
				batch[j].Data, batch[j].Extensions = nil, nil
			}
			want := m.expectStore(batch, true)
			before := m.floor()
			err := s.store.StoreLogs(batch)
			if !isErr(err, want) {
				t.Fatalf("%s: StoreLogs(%s at %d): got %v, want %v", s.name, fault, batch[0].Index, err, want)
			}
			if want != nil {
				return
			}
			m.persisted = max(m.persisted, before)
			for _, e := range batch {
				m.entries[e.Index] = modelEntry{term: e.Term, typ: e.Type, data: e.Data}
			}
			if m.last == 0 {
				m.first = batch[0].Index
			}
			m.last = batch[len(batch)-1].Index
		},
		"delete": func(t *rapid.T) {
			lo, hi := m.first, m.last
			if hi == 0 {
				lo, hi = 1, 4
			}
			dmin := uint64(rapid.IntRange(int(lo)-1, int(hi)+1).Draw(t, "min"))
			dmax := uint64(rapid.IntRange(int(lo)-1, int(hi)+2).Draw(t, "max"))
			if rapid.Bool().Draw(t, "suffix") {
				dmax = m.last
			}
			if rapid.Bool().Draw(t, "prefix") {
				dmin = m.first
			}
			what, want := m.expectDelete(dmin, dmax)
			before := m.floor()
			err := s.store.DeleteRange(dmin, dmax)
			if !isErr(err, want) {
				t.Fatalf("%s: DeleteRange(%d,%d) on [%d,%d] floor %d: got %v, want %v", s.name, dmin, dmax, m.first, m.last, m.floor(), err, want)
			}
			switch what {
			case "reset":
				m.entries = map[uint64]modelEntry{}
				m.first, m.last = 0, 0
			case "compact":
				for i := m.first; i <= dmax; i++ {
					delete(m.entries, i)
				}
				m.first = dmax + 1
			case "truncate":
				for i := dmin; i <= m.last; i++ {
					delete(m.entries, i)
				}
				m.last = dmin - 1
			}
			if s.persistOnDel && (what == "reset" || what == "truncate") {
				m.persisted = max(m.persisted, before)
			}
		},
		"floor": func(t *rapid.T) {
			if m.last > m.fnFloor {
				m.fnFloor = uint64(rapid.IntRange(int(m.fnFloor), int(m.last)).Draw(t, "floor"))
			}
		},
		"get": func(t *rapid.T) {
			i := uint64(rapid.IntRange(0, int(m.last)+2).Draw(t, "i"))
			var e raft.Log
			err := s.store.GetLog(i, &e)
			want, ok := m.entries[i]
			if !ok || i < m.first {
				if !errors.Is(err, raft.ErrLogNotFound) {
					t.Fatalf("%s: get %d: %v, want not found", s.name, i, err)
				}
				return
			}
			if err != nil || e.Term != want.term || !bytes.Equal(e.Data, want.data) {
				t.Fatalf("%s: get %d: err %v term %d", s.name, i, err, e.Term)
			}
		},
		"restart": func(t *rapid.T) {
			if s.persistClose {
				m.persisted = max(m.persisted, m.floor())
			}
			if err := s.restart(); err != nil {
				t.Fatalf("%s: restart: %v", s.name, err)
			}
			// raft has learned nothing yet: only the persisted floor counts.
			m.fnFloor = 0
			bind()
			// A compaction is durable (a first-index mark in *Log, the
			// inner store's own for the Guard): checkAll compares the
			// restarted log's first index with the model's.
		},
		"": checkAll,
	})
}
