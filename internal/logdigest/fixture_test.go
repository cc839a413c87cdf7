package logdigest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// fixtureStore is a read-only raft.LogStore whose GetLog returns, per
// index, a stored entry or a fixed error: every kind of view the protocol
// carries (stamped, unstamped, empty, a lost payload under its stamp, a
// body against its stamp, a guard refusal, an unreadable record, a hole).
type fixtureStore struct {
	first, last uint64
	logs        map[uint64]*raft.Log
	errs        map[uint64]error
}

var errFixtureRead = errors.New("fixture: record crc mismatch at segment 00000003.seg offset 4096")

func stamped(ix, term uint64, data string) *raft.Log {
	l := &raft.Log{Index: ix, Term: term, Type: raft.LogCommand, Data: []byte(data)}
	segment.Stamp(l)
	return l
}

// newFixture holds indexes 1..12; 4 is a hole.
func newFixture() *fixtureStore {
	s := &fixtureStore{first: 1, last: 12, logs: map[uint64]*raft.Log{}, errs: map[uint64]error{}}
	s.logs[1] = stamped(1, 1, "alpha")
	s.logs[2] = &raft.Log{Index: 2, Term: 2, Type: raft.LogNoop}
	s.logs[3] = stamped(3, 2, string(bytes.Repeat([]byte("b"), 100)))
	s.errs[5] = &wal.GuardError{Op: wal.OpGet, Err: wal.ErrPayloadMismatch, Index: 5, Term: 2,
		StoredTerm: 2, ExpectedTerm: 2, StoredLen: 0, ExpectedLen: 7, StoredCRC: segment.Checksum(nil), ExpectedCRC: segment.Checksum([]byte("lostbdy")),
		TermEqual: true, Segment: "00000001.seg", Offset: 812}
	s.errs[6] = errFixtureRead
	s.errs[7] = &wal.GuardError{Op: wal.OpGet, Err: wal.ErrCorrupt, Index: 7, Term: 3, Segment: "00000002.seg", Offset: 96, Detail: "record checksum"}
	bad := stamped(8, 3, "abc")
	bad.Data = []byte("xyz")
	s.logs[8] = bad
	s.logs[9] = &raft.Log{Index: 9, Term: 3, Type: raft.LogCommand, Data: []byte("unstamped body")}
	s.logs[10] = stamped(10, 3, "")
	s.logs[11] = &raft.Log{Index: 11, Term: 4, Type: raft.LogConfiguration, Data: []byte{1, 2, 3}}
	s.logs[12] = stamped(12, 4, "omega")
	return s
}

func (s *fixtureStore) FirstIndex() (uint64, error) { return s.first, nil }
func (s *fixtureStore) LastIndex() (uint64, error)  { return s.last, nil }

func (s *fixtureStore) GetLog(ix uint64, l *raft.Log) error {
	if err, ok := s.errs[ix]; ok {
		return fmt.Errorf("get %d: %w", ix, err)
	}
	e, ok := s.logs[ix]
	if !ok {
		return raft.ErrLogNotFound
	}
	*l = *e
	return nil
}

var errFixtureReadOnly = errors.New("fixture store is read-only")

func (s *fixtureStore) StoreLog(*raft.Log) error      { return errFixtureReadOnly }
func (s *fixtureStore) StoreLogs([]*raft.Log) error   { return errFixtureReadOnly }
func (s *fixtureStore) DeleteRange(_, _ uint64) error { return errFixtureReadOnly }

// wireCase is one request served by one store.
type wireCase struct {
	name  string
	empty bool // serve an empty store instead of the fixture
	floor bool // the store reports a persisted floor (7)
	req   string
}

var wireCases = []wireCase{
	{name: "info", floor: true, req: `{"op":"info"}`},
	{name: "info-no-floor", req: `{"op":"info"}`},
	{name: "digests-whole", floor: true, req: `{"op":"digests","from":1,"to":12,"parts":3}`},
	{name: "digests-beyond", floor: true, req: `{"op":"digests","from":1,"to":40,"parts":5}`},
	{name: "digests-one-part", floor: true, req: `{"op":"digests","from":2,"to":9,"parts":1}`},
	{name: "digests-more-parts-than-indexes", floor: true, req: `{"op":"digests","from":10,"to":12,"parts":8}`},
	{name: "entries-all", floor: true, req: `{"op":"entries","from":1,"to":12}`},
	{name: "entries-part", floor: true, req: `{"op":"entries","from":3,"to":6}`},
	{name: "entries-beyond", floor: true, req: `{"op":"entries","from":11,"to":30}`},
	{name: "entries-outside", floor: true, req: `{"op":"entries","from":20,"to":30}`},
	{name: "empty-info", empty: true, floor: true, req: `{"op":"info"}`},
	{name: "empty-digests", empty: true, floor: true, req: `{"op":"digests","from":1,"to":100,"parts":4}`},
	{name: "empty-entries", empty: true, floor: true, req: `{"op":"entries","from":1,"to":100}`},
}

type serveFunc func(ctx context.Context, s raft.LogStore, floor func() uint64, req []byte) ([]byte, error)

// serveCase serves c with serve and returns the reply bytes.
func serveCase(serve serveFunc, c wireCase) ([]byte, error) {
	var s raft.LogStore = newFixture()
	if c.empty {
		s = &fixtureStore{}
	}
	var floor func() uint64
	if c.floor {
		floor = func() uint64 { return 7 }
	}
	return serve(context.Background(), s, floor, []byte(c.req))
}
