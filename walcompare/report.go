package walcompare

import (
	"fmt"
	"sort"
	"strings"
)

// Divergence is one index where the members do not all hold the reference
// entry, or one run of indexes a member lacks (Missing or Compacted,
// coalesced into [Index, End) for that Member).
type Divergence struct {
	Index uint64 `json:"index"`
	// End is one past the last index: Index+1 except for coalesced runs.
	End   uint64 `json:"end"`
	Class Class  `json:"class"`
	// Committed: Index is at or below the committed boundary, and the
	// divergence is not an uncommitted Tail. Never set for Missing or
	// Compacted: lag is not a divergence of content.
	Committed bool `json:"committed"`
	// Tail: at or below the boundary, but every deviating member holds a
	// different term above its own persisted commit floor — a former
	// leader's uncommitted tail at indexes the new leader has since
	// committed. Raft's log matching cuts it when the member follows again
	// (the seam may cut above the floor), so it is not a committed
	// divergence. A member without a known floor never makes a Tail, and
	// neither does a lost or mismatched payload under the same term, which
	// log matching would never repair.
	Tail bool `json:"tail,omitempty"`
	// Member names the member a Missing or Compacted run belongs to; empty
	// for a per-index divergence.
	Member string `json:"member,omitempty"`
	// Views holds each member's view, in member order (per-index only).
	Views []View `json:"views,omitempty"`
}

// MemberInfo describes one compared member.
type MemberInfo struct {
	Name   string `json:"name"`
	Source string `json:"source"` // "wal", "raft-boltdb", "logstore", "live"
	Where  string `json:"where,omitempty"`
	// First and Last index seen (0, 0: empty or outside the range).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Floor is the commit floor the member persisted; HasFloor says whether
	// the source records one at all.
	Floor    uint64 `json:"floor"`
	HasFloor bool   `json:"has_floor"`
	// Torn describes a torn tail (an unacknowledged write that the log
	// would cut on open); Notes, damage that no index could be blamed for.
	Torn  string   `json:"torn,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Report is the result of Compare.
type Report struct {
	Members []MemberInfo `json:"members"`
	// [From, End) is the compared range, half-open like every range in a
	// report; 0, 0 when no member holds anything in the requested range.
	From uint64 `json:"from"`
	End  uint64 `json:"end"`
	// To is End-1, the last compared index (0 when nothing was compared):
	// the inclusive form of the same range, kept for callers written
	// before End. New code uses End.
	To uint64 `json:"to"`
	// Committed is the boundary used; Proof says how it was proven.
	Committed      uint64 `json:"committed"`
	CommittedBasis string `json:"committed_basis"` // "floors", "supplied" or "none"
	Proof          string `json:"proof"`
	// Held is the highest index N such that a majority of members hold
	// [1, N+1) identically (a compacted index counts as held; indexes below
	// From are not examined). OverClaimed: a supplied boundary above Held.
	Held        uint64 `json:"held"`
	OverClaimed bool   `json:"over_claimed"`
	// Divergences, ascending by Index (per-index ones before runs at the
	// same index, runs in member order): every one of them.
	Divergences []Divergence `json:"divergences"`
	// Summary counts: for per-index classes the number of indexes of that
	// class, for Missing and Compacted the number of (member, index) pairs,
	// for Same the indexes where every present member holds the reference.
	Summary map[Class]uint64 `json:"summary"`
	// CommittedCount is len(CommittedDivergences()).
	CommittedCount int `json:"committed_divergences"`
	// Calls counts the RPCs made to live members.
	Calls int64 `json:"calls"`
	// Mode is "stream" (members read side by side) or "digest" (live
	// members compared by range digests, drilling into differing ranges).
	Mode string `json:"mode"`
}

// CommittedDivergences returns the divergences at or below the committed
// boundary. They must be none.
func (r *Report) CommittedDivergences() []Divergence {
	var out []Divergence
	for _, d := range r.Divergences {
		if d.Committed {
			out = append(out, d)
		}
	}
	return out
}

// builder accumulates a report in either mode.
type builder struct {
	n     int
	names []string
	divs  []Divergence
	// runs[m] is the index in divs of member m's last lag run, -1 if none.
	runs []int
}

func newBuilder(names []string) *builder {
	b := &builder{n: len(names), names: names, runs: make([]int, len(names))}
	for i := range b.runs {
		b.runs[i] = -1
	}
	return b
}

// index records a classified index (class from Classify) and the lag of
// its absent members. views is copied when kept.
func (b *builder) index(ix uint64, class Class, views []View) {
	for m := range views {
		if c := views[m].Class; c.lag() {
			b.lag(m, c, ix, ix+1)
		}
	}
	if class == Same {
		return
	}
	b.divs = append(b.divs, Divergence{Index: ix, End: ix + 1, Class: class, Views: append([]View(nil), views...)})
}

// lag records that member m lacks [start, end) for reason c, coalescing
// with its previous run.
func (b *builder) lag(m int, c Class, start, end uint64) {
	if start >= end {
		return
	}
	if k := b.runs[m]; k >= 0 && b.divs[k].Class == c && start <= b.divs[k].End {
		b.divs[k].End = max(b.divs[k].End, end)
		return
	}
	b.runs[m] = len(b.divs)
	b.divs = append(b.divs, Divergence{Index: start, End: end, Class: c, Member: b.names[m]})
}

// finish sorts the divergences and fills the boundary, flags and counts.
func (b *builder) finish(r *Report, lo, hi uint64, opts Options) {
	order := make(map[string]int, b.n)
	for i, n := range b.names {
		order[n] = i + 1
	}
	sort.SliceStable(b.divs, func(i, j int) bool {
		di, dj := &b.divs[i], &b.divs[j]
		if di.Index != dj.Index {
			return di.Index < dj.Index
		}
		return order[di.Member] < order[dj.Member]
	})
	r.Divergences = b.divs
	if r.Divergences == nil {
		r.Divergences = []Divergence{}
	}
	r.From, r.End, r.To = 0, 0, 0
	if hi >= lo && hi != 0 {
		r.From, r.End, r.To = lo, hi+1, hi
	}
	r.Summary = make(map[Class]uint64, len(Classes))
	for _, c := range Classes {
		r.Summary[c] = 0
	}
	// firstBad[m]: the first index m does not hold identically.
	firstBad := make([]uint64, b.n)
	bad := func(m int, ix uint64) {
		if firstBad[m] == 0 || ix < firstBad[m] {
			firstBad[m] = ix
		}
	}
	var perIndex uint64
	for _, d := range r.Divergences {
		if d.Member != "" {
			r.Summary[d.Class] += d.End - d.Index
			if d.Class == Missing {
				bad(order[d.Member]-1, d.Index)
			}
			continue
		}
		perIndex++
		r.Summary[d.Class]++
		for m, v := range d.Views {
			if v.Class != Same && !v.Class.lag() {
				bad(m, d.Index)
			}
		}
	}
	r.Summary[Same] = r.End - r.From - perIndex
	held := make([]uint64, b.n)
	for m := range held {
		held[m] = hi
		if firstBad[m] != 0 {
			held[m] = firstBad[m] - 1
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i] > held[j] })
	if b.n > 0 {
		r.Held = held[b.n/2] // the majority-th largest
	}
	b.boundary(r, opts)
	r.CommittedCount = 0
	for i := range r.Divergences {
		d := &r.Divergences[i]
		if d.Member != "" || d.Index > r.Committed {
			continue
		}
		d.Tail = true
		for m, v := range d.Views {
			if v.Class == Same || v.Class.lag() {
				continue
			}
			if v.Class != TermMismatch || m >= len(r.Members) || !r.Members[m].HasFloor || r.Members[m].Floor >= d.Index {
				d.Tail = false
			}
		}
		d.Committed = !d.Tail
		if d.Committed {
			r.CommittedCount++
		}
	}
}

// boundary sets Committed and Proof: a supplied boundary as given (checked
// against Held), otherwise the highest persisted commit floor.
func (b *builder) boundary(r *Report, opts Options) {
	var floors []string
	var maxFloor uint64
	var from string
	anyFloor := false
	for _, m := range r.Members {
		if !m.HasFloor {
			floors = append(floors, m.Name+"=none")
			continue
		}
		anyFloor = true
		floors = append(floors, fmt.Sprintf("%s=%d", m.Name, m.Floor))
		if m.Floor > maxFloor || from == "" {
			maxFloor, from = m.Floor, m.Name
		}
	}
	fl := strings.Join(floors, " ")
	majority := b.n/2 + 1
	scope := ""
	if r.From > 1 {
		scope = fmt.Sprintf("; indexes below %d not examined", r.From)
	}
	switch {
	case opts.Committed > 0:
		r.Committed, r.CommittedBasis = opts.Committed, "supplied"
		r.OverClaimed = opts.Committed > r.Held
		r.Proof = fmt.Sprintf("supplied by the caller: %d (used as given, never raised; persisted floors: %s)", opts.Committed, fl)
		if r.OverClaimed {
			r.Proof += fmt.Sprintf("; OVER-CLAIMED: only [1, %d) is held identically by a majority (%d of %d)%s", r.Held+1, majority, b.n, scope)
		} else {
			r.Proof += fmt.Sprintf("; a majority (%d of %d) holds [1, %d) identically%s", majority, b.n, r.Committed+1, scope)
		}
	case anyFloor && maxFloor > 0:
		r.Committed, r.CommittedBasis = maxFloor, "floors"
		r.Proof = fmt.Sprintf("persisted commit floors: %s; boundary = the highest, %d from %s (a floor is only ever a committed index)", fl, maxFloor, from)
		if r.Held < maxFloor {
			r.Proof += fmt.Sprintf("; note: a majority holds only [1, %d) identically (members lag or diverge below the floor)%s", r.Held+1, scope)
		}
	default:
		r.Committed, r.CommittedBasis = 0, "none"
		r.Proof = fmt.Sprintf("nothing proven committed: no member persisted a commit floor (%s) and none was supplied", fl)
	}
}
