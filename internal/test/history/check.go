package history

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
)

// Log is a member's log as the checker reads it. The package names no log
// reader of its own (a node links this package for its Sink, and must not
// link the offline readers): the test helpers adapt a walcompare.Member
// (clustertest.ReferenceLog).
type Log interface {
	// ScanEntries calls fn with the entries with index in [from, to], both
	// included (to 0: no bound), in ascending index order, skipping the
	// indexes the log does not hold; it stops early, returning nil, when
	// fn returns false.
	ScanEntries(ctx context.Context, from, to uint64, fn func(ix uint64, e LogEntry) bool) error
}

// LogEntry is what the checker reads of one record of a Log.
type LogEntry struct {
	Term uint64
	Type raft.LogType
	// CRC is the CRC32C of the stored payload (segment.Checksum).
	CRC uint32
	// Corrupt: the record exists but fails its checks.
	Corrupt bool
}

// Reference is the log applied histories are checked against.
type Reference struct {
	// Name labels it in violations (the member whose log it is).
	Name string
	// Log is that member's log.
	Log Log
	// Commit is an index known committed: Log's entries up to it are the
	// committed log.
	Commit uint64
}

// Violation is one broken rule of a member's applied history.
type Violation struct {
	// Member applied Applied (KindApplied, or the KindRestored record of a
	// snapshot beyond the log).
	Member  string
	Applied Record
	// Committed is the committed entry at Applied.Index when the violation
	// is a mismatch or a skipped entry (Committed.Index != 0).
	Committed Record
	// Other names the member whose record disagrees when the index was
	// compacted on the reference.
	Other string
	msg   string
}

func (v Violation) String() string { return "applied-history violation: " + v.msg }

// Error makes a Violation an error.
func (v Violation) Error() string { return v.String() }

// Stats counts what a Checker has checked so far.
type Stats struct {
	Applied      int // applied records checked
	Verified     int // ... against the reference log
	CrossChecked int // ... against another member's record (compacted on the reference)
	Unverifiable int // ... compacted on the reference and applied by no other member yet
	Runs         int // Started and Restored records
}

func (s Stats) String() string {
	return fmt.Sprintf("%d applied records: %d against the committed log, %d across members, %d unverifiable (compacted); %d starts and restores",
		s.Applied, s.Verified, s.CrossChecked, s.Unverifiable, s.Runs)
}

// Checker checks applied histories incrementally: each Check reads what the
// sources recorded since the last one. Reuse one Checker per cluster. It is
// safe for concurrent use (Checks run one at a time).
type Checker struct {
	mu      sync.Mutex
	members map[string]*cursor
	seen    map[uint64]seenEntry
	stats   Stats
}

// cursor is how far a member's history was checked.
type cursor struct {
	next  int    // records consumed
	prev  uint64 // last index applied (or restored) in the current run
	known bool   // prev is known (a Started or Restored record was seen)
}

// seenEntry is the first accepted record of an index, for cross-checks.
type seenEntry struct {
	rec    Record
	member string
}

// NewChecker returns a Checker that has seen nothing.
func NewChecker() *Checker {
	return &Checker{members: map[string]*cursor{}, seen: map[uint64]seenEntry{}}
}

// Stats returns the counts so far.
func (c *Checker) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Check reads the sources' new records, then the reference log, and returns
// the violations among them (each reported once). A record above
// ref.Commit waits for a later Check unless final: then the run is over,
// ref.Log holds the final log and every record must be in it. err is a
// failure to read a source or the reference, never a violation.
func (c *Checker) Check(ctx context.Context, ref Reference, final bool, sources ...Source) ([]Violation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	news := make([][]Record, len(sources))
	lo, hi := uint64(0), uint64(0)
	for i, s := range sources {
		cur := c.cursor(s.Member())
		recs, err := s.Since(cur.next)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", s.Member(), err)
		}
		news[i] = recs
		from := cur.prev + 1
		for _, r := range recs {
			switch r.Kind {
			case KindStarted:
				from = 1
			case KindRestored:
				from = min(from, r.Index+1)
			case KindApplied:
				from = min(from, r.Index)
				hi = max(hi, r.Index)
			}
		}
		if len(recs) > 0 && (lo == 0 || from < lo) {
			lo = from
		}
	}
	if lo == 0 {
		return nil, nil
	}
	log := refLog{views: map[uint64]LogEntry{}, bound: ref.Commit}
	scan := func(from, to uint64) error {
		return ref.Log.ScanEntries(ctx, from, to, func(ix uint64, v LogEntry) bool {
			log.views[ix] = v
			log.held = max(log.held, ix)
			return true
		})
	}
	var err error
	switch {
	case final:
		err = scan(lo, 0) // the whole log: its end is the bound
	case hi > 0 && lo <= min(hi, ref.Commit):
		err = scan(lo, min(hi, ref.Commit))
	}
	if err != nil {
		return nil, fmt.Errorf("reference log %s: %w", ref.Name, err)
	}
	if final {
		log.bound = max(log.bound, log.held)
	}
	var out []Violation
	for i, s := range sources {
		out = append(out, c.walk(s.Member(), news[i], ref, &log, final)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Applied.Index < out[j].Applied.Index })
	return out, nil
}

func (c *Checker) cursor(member string) *cursor {
	cur := c.members[member]
	if cur == nil {
		cur = &cursor{}
		c.members[member] = cur
	}
	return cur
}

// refLog is the part of the reference log one Check read.
type refLog struct {
	views map[uint64]LogEntry
	held  uint64 // highest index read
	bound uint64 // entries up to it count as committed
}

// entry returns the committed entry at ix, if the reference holds it
// intact.
func (l *refLog) entry(ix uint64) (LogEntry, bool) {
	v, ok := l.views[ix]
	return v, ok && ix <= l.bound && !v.Corrupt
}

// walk consumes one member's new records in order, up to the first that
// must wait for a later Check (above the bound, not final).
func (c *Checker) walk(member string, recs []Record, ref Reference, log *refLog, final bool) []Violation {
	cur := c.members[member]
	var out []Violation
	for _, r := range recs {
		if r.Kind != KindStarted && r.Index > log.bound {
			if !final {
				break // not known committed yet
			}
			out = append(out, beyond(member, r, ref, log))
			cur.next++
			cur.prev, cur.known = r.Index, true
			continue
		}
		cur.next++
		switch r.Kind {
		case KindStarted:
			c.stats.Runs++
			cur.prev, cur.known = 0, true
			continue
		case KindRestored:
			c.stats.Runs++
			cur.prev, cur.known = r.Index, true
			continue
		}
		c.stats.Applied++
		if cur.known && r.Index <= cur.prev {
			out = append(out, Violation{Member: member, Applied: r,
				msg: fmt.Sprintf("member %s applied index %d term %d after index %d in the same run (not increasing)", member, r.Index, r.Term, cur.prev)})
		} else if cur.known {
			out = append(out, c.skipped(member, cur.prev, r, ref, log)...)
		}
		cur.prev, cur.known = r.Index, true
		if v, ok := log.entry(r.Index); ok {
			c.stats.Verified++
			committed := Record{Kind: KindApplied, Index: r.Index, Term: v.Term, Type: v.Type, CRC: v.CRC}
			if !same(r, committed) {
				out = append(out, mismatch(member, r, committed, ref))
				continue
			}
			if s, ok := c.seen[r.Index]; ok && !same(s.rec, committed) {
				// An earlier record of a compacted index is now known wrong.
				out = append(out, mismatch(s.member, s.rec, committed, ref))
			}
			c.seen[r.Index] = seenEntry{r, member}
			continue
		}
		s, ok := c.seen[r.Index]
		switch {
		case !ok:
			c.stats.Unverifiable++
			c.seen[r.Index] = seenEntry{r, member}
		case same(s.rec, r):
			c.stats.CrossChecked++
		default:
			c.stats.CrossChecked++
			out = append(out, Violation{Member: member, Applied: r, Other: s.member,
				msg: fmt.Sprintf("members %s and %s applied index %d differently: term %d crc %08x (%s) and term %d crc %08x (%s); the index is compacted on %s",
					member, s.member, r.Index, r.Term, r.CRC, r.Type, s.rec.Term, s.rec.CRC, s.rec.Type, ref.Name)})
		}
	}
	return out
}

func beyond(member string, r Record, ref Reference, log *refLog) Violation {
	if r.Kind == KindRestored {
		return Violation{Member: member, Applied: r,
			msg: fmt.Sprintf("member %s restored a snapshot at index %d, beyond the committed log (it ends at %d on %s)", member, r.Index, log.bound, ref.Name)}
	}
	return Violation{Member: member, Applied: r,
		msg: fmt.Sprintf("member %s applied index %d term %d crc %08x, beyond the committed log (it ends at %d on %s)", member, r.Index, r.Term, r.CRC, log.bound, ref.Name)}
}

// skipped reports committed entries the state machine must have been
// handed between prev and r.
func (c *Checker) skipped(member string, prev uint64, r Record, ref Reference, log *refLog) []Violation {
	var out []Violation
	for ix := prev + 1; ix < r.Index; ix++ {
		v, ok := log.entry(ix)
		if !ok || !appliedType(v.Type) {
			continue
		}
		out = append(out, Violation{Member: member, Applied: r,
			Committed: Record{Kind: KindApplied, Index: ix, Term: v.Term, Type: v.Type, CRC: v.CRC},
			msg: fmt.Sprintf("member %s skipped committed index %d term %d crc %08x (%s): it applied index %d after %d (%s's log, commit %d)",
				member, ix, v.Term, v.CRC, v.Type, r.Index, prev, ref.Name, ref.Commit)})
	}
	return out
}

func mismatch(member string, r, committed Record, ref Reference) Violation {
	msg := fmt.Sprintf("member %s applied index %d term %d crc %08x, committed log has term %d crc %08x (%s's log, commit %d)",
		member, r.Index, r.Term, r.CRC, committed.Term, committed.CRC, ref.Name, ref.Commit)
	if r.Type != committed.Type {
		msg += fmt.Sprintf("; applied a %s where the committed entry is a %s", r.Type, committed.Type)
	}
	return Violation{Member: member, Applied: r, Committed: committed, msg: msg}
}

// appliedType reports entry types hashicorp/raft hands to the state
// machine.
func appliedType(t raft.LogType) bool { return t == raft.LogCommand || t == raft.LogConfiguration }

func same(a, b Record) bool { return a.Term == b.Term && a.Type == b.Type && a.CRC == b.CRC }
