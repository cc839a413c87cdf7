package walcompare

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
)

// Member is one log to compare. Implementations: FromLogStore, OpenDir,
// Dial. A Member is used by one Compare at a time.
type Member interface {
	// Name labels the member in reports.
	Name() string
	// Scan calls fn with the member's entries with index in [from, to]
	// (to 0: no bound) in ascending index order. Indexes the member does
	// not hold are skipped; a record that exists but fails its checks is
	// passed with Present and Corrupt set. fn must not keep v. Scan stops
	// early, returning nil, when fn returns false.
	Scan(ctx context.Context, from, to uint64, fn func(ix uint64, v *View) bool) error
	// Info describes the member; First, Last, Floor, Torn and Notes are
	// complete once a Scan over the whole log has returned.
	Info() MemberInfo
	// Close releases the member's files or connections.
	Close() error
}

// FloorReporter is implemented by log stores that persist a commit floor
// (*wal.Log does): FromLogStore uses it as the member's floor.
type FloorReporter interface {
	PersistedFloor() uint64
}

// FromLogStore makes a member of any raft.LogStore, read with GetLog from
// its first to its last index. A GetLog error other than
// raft.ErrLogNotFound makes that index Corrupt (a *wal.GuardError for an
// empty body under a stamp makes it a lost payload). Close does not close s.
func FromLogStore(name string, s raft.LogStore) Member {
	return &storeMember{name: name, s: s, info: MemberInfo{Name: name, Source: "logstore"}}
}

type storeMember struct {
	name string
	s    raft.LogStore
	info MemberInfo
}

func (m *storeMember) Name() string { return m.name }
func (m *storeMember) Close() error { return nil }

func (m *storeMember) Info() MemberInfo {
	info := m.info
	if f, ok := m.s.(FloorReporter); ok {
		info.Floor, info.HasFloor = f.PersistedFloor(), true
	}
	return info
}

func (m *storeMember) Scan(ctx context.Context, from, to uint64, fn func(uint64, *View) bool) error {
	first, err := m.s.FirstIndex()
	if err != nil {
		return fmt.Errorf("walcompare: %s: first index: %w", m.name, err)
	}
	last, err := m.s.LastIndex()
	if err != nil {
		return fmt.Errorf("walcompare: %s: last index: %w", m.name, err)
	}
	m.info.First, m.info.Last = first, last
	if last == 0 {
		m.info.First = 0
		return nil
	}
	lo, hi := max(first, from), last
	if to != 0 {
		hi = min(hi, to)
	}
	var l raft.Log
	var v View
	for ix := lo; ix <= hi && ix >= lo; ix++ {
		if ix&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !viewOf(m.s, ix, &l, &v) {
			continue
		}
		if !fn(ix, &v) {
			return nil
		}
	}
	return nil
}

// viewOf reads index ix of s into v; false when s does not hold it.
func viewOf(s raft.LogStore, ix uint64, l *raft.Log, v *View) bool {
	*l = raft.Log{}
	err := s.GetLog(ix, l)
	if errors.Is(err, raft.ErrLogNotFound) {
		return false
	}
	*v = View{Present: true}
	if err != nil {
		var g *wal.GuardError
		if errors.As(err, &g) && errors.Is(err, wal.ErrPayloadMismatch) && g.StoredLen == 0 && g.ExpectedLen > 0 {
			// wal refuses to return a lost payload; its diagnostic says
			// what is stored.
			v.Term, v.Stamped, v.StampLen, v.StampCRC = g.Term, true, g.ExpectedLen, g.ExpectedCRC
			v.CRC = wal.Checksum(nil)
			return true
		}
		v.Corrupt, v.Detail = true, err.Error()
		if g != nil {
			v.Term = g.Term
		}
		return true
	}
	fillView(v, l)
	return true
}

// fillView sets v from an entry read whole.
func fillView(v *View, l *raft.Log) {
	v.Term, v.Type = l.Term, l.Type
	v.Len, v.CRC = uint32(len(l.Data)), wal.Checksum(l.Data)
	if st, ok := wal.ParseStamp(l.Extensions); ok {
		v.Stamped, v.StampLen, v.StampCRC = true, st.Len, st.CRC
		if v.Len != 0 && (v.Len != st.Len || v.CRC != st.CRC) {
			v.Corrupt = true
			v.Detail = fmt.Sprintf("payload (len %d crc %08x) does not match its stamp (len %d crc %08x)", v.Len, v.CRC, st.Len, st.CRC)
		}
	}
}
