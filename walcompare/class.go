package walcompare

import "github.com/hashicorp/raft"

// Class is what one member's entry at one index is, compared with the
// reference entry at that index (see Classify), and, for a Divergence, the
// most severe class among the members at that index.
type Class string

// The classes. Missing and Compacted are lag, never a divergence of content.
const (
	// Same: the member holds the reference entry.
	Same Class = "same"
	// Missing: the member's log ends before this index (lag), or has no
	// entry here.
	Missing Class = "missing"
	// Compacted: the index is below the member's first index.
	Compacted Class = "compacted"
	// TermMismatch: the member holds a different term here.
	TermMismatch Class = "term-mismatch"
	// PayloadMismatch: same term, but a different entry type, payload length
	// or payload CRC.
	PayloadMismatch Class = "payload-mismatch"
	// PayloadLost: present but empty where the others have a body, or an
	// empty body under a non-empty stamp.
	PayloadLost Class = "payload-lost"
	// Corrupt: the stored record fails its own checksum (or cannot be read).
	Corrupt Class = "corrupt"
)

// Classes lists every class, in report order.
var Classes = []Class{Same, Missing, Compacted, TermMismatch, PayloadMismatch, PayloadLost, Corrupt}

// severity orders the classes of one index: a Divergence's Class is the
// most severe of its members' classes.
func (c Class) severity() int {
	switch c {
	case PayloadLost:
		return 6
	case PayloadMismatch:
		return 5
	case TermMismatch:
		return 4
	case Corrupt:
		return 3
	case Missing:
		return 2
	case Compacted:
		return 1
	}
	return 0
}

// lag reports whether c is Missing or Compacted.
func (c Class) lag() bool { return c == Missing || c == Compacted }

// View is one member's entry at one index: what is stored, never the payload.
// It is logdigest.View, the protocol's view of a stored entry, with the
// member's Class added.
type View struct {
	// Class is this member's class at the index (set by Classify).
	Class Class `json:"class"`
	// Present: the member holds a record at the index (possibly corrupt).
	Present bool         `json:"present"`
	Term    uint64       `json:"term,omitempty"`
	Type    raft.LogType `json:"type"`
	// Len and CRC describe the stored payload (Data): its length and its
	// CRC32C, computed.
	Len uint32 `json:"len"`
	CRC uint32 `json:"crc"`
	// Stamped: the entry carries a payload stamp, saying the length and
	// CRC32C the payload had when it was proposed.
	Stamped  bool   `json:"stamped,omitempty"`
	StampLen uint32 `json:"stamp_len,omitempty"`
	StampCRC uint32 `json:"stamp_crc,omitempty"`
	// Corrupt: the stored record fails its own checksum; Detail says where
	// (segment, offset) and why.
	Corrupt bool   `json:"corrupt,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// lost reports an empty body under a non-empty stamp: logdigest.View.Lost,
// which the digests count as bad (TestLostAgreesWithDigests pins that they
// agree). It is written out because Classify calls it O(members²) times
// per index.
func (v *View) lost() bool {
	return v.Present && !v.Corrupt && v.Len == 0 && v.Stamped && v.StampLen > 0
}

type key struct {
	term     uint64
	typ      raft.LogType
	len, crc uint32
}

func (v *View) key() key { return key{v.Term, v.Type, v.Len, v.CRC} }

// Classify sets the Class of every view at one index and returns the
// index's class: the most severe one, Same when every present member holds
// the reference entry. Views of absent members must already carry Missing
// or Compacted. It is pure and allocates nothing.
//
// The reference is chosen among the present members whose record passes its
// checks and is not a lost payload: the (term, type, length, CRC) held by
// the most members (plurality; a majority when there is one). An empty body
// is never the reference when a candidate of the same term has a body. A tie goes to the
// higher term (a later leader's entry is the one Raft keeps), then to the
// member listed first. So in a three-way disagreement with three different
// terms the highest term is the reference and the other two are
// TermMismatch; with one term and three payloads, the first member's is the
// reference and the others are PayloadMismatch.
//
// Against the reference a member is: Corrupt (its record fails its
// checksum), PayloadLost (an empty body under a non-empty stamp, or an empty
// body of the reference's term where the reference has one), TermMismatch,
// PayloadMismatch (same term; type, length or CRC differ) or Same.
func Classify(views []View) Class {
	ref := -1
	refCount := 0
	// An empty body is not eligible when a candidate of its term has one.
	bodied := func(term uint64) bool {
		for j := range views {
			w := &views[j]
			if w.Present && !w.Corrupt && !w.lost() && w.Len > 0 && w.Term == term {
				return true
			}
		}
		return false
	}
	for i := range views {
		v := &views[i]
		if !v.Present || v.Corrupt || v.lost() || (v.Len == 0 && bodied(v.Term)) {
			continue
		}
		if ref >= 0 && views[ref].key() == v.key() {
			continue // counted with its first holder
		}
		n := 0
		for j := range views {
			w := &views[j]
			if w.Present && !w.Corrupt && !w.lost() && w.key() == v.key() {
				n++
			}
		}
		if ref < 0 || n > refCount || (n == refCount && v.Term > views[ref].Term) {
			ref, refCount = i, n
		}
	}
	worst := Same
	for i := range views {
		v := &views[i]
		switch {
		case !v.Present:
			if !v.Class.lag() {
				v.Class = Missing
			}
		case v.Corrupt:
			v.Class = Corrupt
		case v.lost():
			v.Class = PayloadLost
		case ref < 0:
			v.Class = Same
		case v.Term != views[ref].Term:
			v.Class = TermMismatch
		case v.Len == 0 && views[ref].Len > 0:
			v.Class = PayloadLost
		case v.key() != views[ref].key():
			v.Class = PayloadMismatch
		default:
			v.Class = Same
		}
		if !v.Class.lag() && v.Class.severity() > worst.severity() {
			worst = v.Class
		}
	}
	return worst
}
