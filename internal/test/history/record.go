package history

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Kind says what a Record records.
type Kind uint8

// Record kinds.
const (
	// KindStarted: the member opened; its state machine is empty.
	KindStarted Kind = 1
	// KindRestored: the state machine was replaced by a snapshot holding
	// the state at Index.
	KindRestored Kind = 2
	// KindApplied: the entry (Index, Term, Type, CRC) was applied.
	KindApplied Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindStarted:
		return "started"
	case KindRestored:
		return "restored"
	case KindApplied:
		return "applied"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Record is one step of a member's applied history.
type Record struct {
	Kind Kind
	// Index: the applied entry's index (KindApplied) or the snapshot's
	// applied index (KindRestored); 0 for KindStarted.
	Index uint64
	// Term and Type of the applied entry (KindApplied only).
	Term uint64
	Type raft.LogType
	// CRC is the CRC32C of the applied entry's Data (segment.Checksum), equal
	// to its payload stamp (KindApplied only).
	CRC uint32
}

// Validate checks a record's fields against its kind.
func (r Record) Validate() error {
	switch r.Kind {
	case KindStarted:
		if r.Index != 0 || r.Term != 0 || r.Type != 0 || r.CRC != 0 {
			return fmt.Errorf("%w: started record with fields set", ErrCorrupt)
		}
	case KindRestored:
		if r.Index == 0 || r.Term != 0 || r.Type != 0 || r.CRC != 0 {
			return fmt.Errorf("%w: restored record at index %d with entry fields set", ErrCorrupt, r.Index)
		}
	case KindApplied:
		if r.Index == 0 || r.Term == 0 {
			return fmt.Errorf("%w: applied record with index %d term %d", ErrCorrupt, r.Index, r.Term)
		}
	default:
		return fmt.Errorf("%w: unknown record kind %d", ErrCorrupt, uint8(r.Kind))
	}
	return nil
}

func (r Record) String() string {
	switch r.Kind {
	case KindApplied:
		return fmt.Sprintf("applied index %d term %d crc %08x (%s)", r.Index, r.Term, r.CRC, r.Type)
	case KindRestored:
		return fmt.Sprintf("restored to index %d", r.Index)
	}
	return r.Kind.String()
}

// Sink receives a member's applied history. The node calls Append from one
// goroutine at a time, in history order; recs is only valid during the
// call. Append must not block for long: it runs on the state machine's
// goroutine.
type Sink interface {
	Append(recs []Record)
}

// Source is one member's recorded history, read incrementally by a
// Checker.
type Source interface {
	// Member names the member in violations.
	Member() string
	// Since returns the records from the n-th on (0-based) recorded so far;
	// a torn last record of a file is left out until it is whole.
	Since(n int) ([]Record, error)
}

// Memory is a Sink and Source keeping one member's records in memory, for
// in-process members (it outlives a restart of the member). It is safe for
// concurrent use.
type Memory struct {
	name string
	mu   sync.Mutex
	recs []Record
}

var (
	_ Sink   = (*Memory)(nil)
	_ Source = (*Memory)(nil)
)

// NewMemory returns an empty history of the member name.
func NewMemory(name string) *Memory { return &Memory{name: name} }

// Append implements Sink.
func (m *Memory) Append(recs []Record) {
	m.mu.Lock()
	m.recs = append(m.recs, recs...)
	m.mu.Unlock()
}

// Member implements Source.
func (m *Memory) Member() string { return m.name }

// Since implements Source.
func (m *Memory) Since(n int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n >= len(m.recs) {
		return nil, nil
	}
	return append([]Record(nil), m.recs[n:]...), nil
}
