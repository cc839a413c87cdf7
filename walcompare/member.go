package walcompare

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/logdigest"
)

// Member is one log to compare. Implementations: FromLogStore, OpenDir,
// Dial. A Member is used by one Compare at a time.
type Member interface {
	// Name labels the member in reports.
	Name() string
	// Scan calls fn with the member's entries with index in [from, to],
	// both included (to 0: no bound), in ascending index order. Indexes the member does
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
// empty body under a stamp makes it a lost payload): the view is
// logdigest.ReadView's, as a live member serves it. Close does not close s.
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
	var d logdigest.View
	for ix := lo; ix <= hi && ix >= lo; ix++ {
		if ix&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !logdigest.ReadView(m.s, ix, &l, &d) {
			continue
		}
		v := viewOf(&d)
		if !fn(ix, &v) {
			return nil
		}
	}
	return nil
}
