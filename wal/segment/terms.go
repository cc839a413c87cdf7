package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
)

// The log's term index: the index at which each term of the log began.
//
// A raft log's terms never decrease, so the term of any entry is the term
// of the last term start at or below its index. The log keeps that list
// across compaction, so it can still say which term it held at an index
// whose entry is gone: a member whose floor the leader compacted asks the
// leader for its term there before it installs the leader's snapshot, and
// refuses the snapshot when the two differ (the raft package's install
// check). A snapshot names only its last entry, so without the list an
// install past a member's floor cannot tell a lagging member's catch-up
// from the replacement of entries the member committed.
//
// What is persisted, and when. The starts of the entries in the segment
// files are rebuilt by Open from the records; only the starts of compacted
// entries need to be kept elsewhere. Each compaction that drops a start
// not yet kept writes the list of starts below the new first index to the
// stable store (one bbolt transaction, durable when it returns) before the
// first-index mark, so the stored list always holds every start below the
// first index. A whole-log reset (a snapshot install) clears the stored
// list before the reset segment is written; the installing member then
// adopts the sender's list up to the snapshot (AdoptTerms). A crash in
// between leaves the list cleared: the log then knows terms only from its
// first index on (Known). Unknown is always an honest answer; a wrong term
// never is.

// TermStart is where a term of the log began: the index of its first entry.
type TermStart struct {
	Index, Term uint64
}

// TermList is a term index through an index: the starts at or below
// Through, answering for the indexes from Known (0: it knows none) to
// Through. It is what the log stores and what a member sends another
// (TermStarts; the raft package's jr.terms).
type TermList struct {
	Known, Through uint64
	Starts         []TermStart
}

// TermAt is the term at index, when the list covers it.
func (l TermList) TermAt(index uint64) (uint64, bool) {
	if l.Known == 0 || index < l.Known || index > l.Through {
		return 0, false
	}
	k := searchStarts(l.Starts, index)
	if k == 0 {
		return 0, false
	}
	return l.Starts[k-1].Term, true
}

// Encode is the list's encoding: version, Known, Through, count, the
// starts, and a CRC32C of everything before it.
func (l TermList) Encode() []byte { return encodeTerms(l.Known, l.Through, l.Starts) }

// DecodeTermList reads an encoded list, refusing anything damaged or not a
// term index (ErrCorrupt): lengths, checksum, order, a start past a
// non-zero Through. It allocates no more than b holds.
func DecodeTermList(b []byte) (TermList, error) {
	known, through, starts, err := decodeTerms(b)
	if err != nil {
		return TermList{}, err
	}
	if n := len(starts); through != 0 && n > 0 && starts[n-1].Index > through {
		return TermList{}, fmt.Errorf("%w: term index: a start at %d past %d", ErrCorrupt, starts[n-1].Index, through)
	}
	return TermList{Known: known, Through: through, Starts: starts}, nil
}

// ErrBadTerms is returned by AdoptTerms for a list that is not a term
// index of the log it would describe.
var ErrBadTerms = errors.New("wal: not a valid term index for this log")

// termIndex is the log's term starts, under Store.mu.
type termIndex struct {
	// known is the lowest index the list answers for (0: none yet; the
	// first entry stored sets it).
	known uint64
	// through is the highest index the list answers for while the log
	// holds nothing past it: the snapshot index after AdoptTerms.
	through uint64
	starts  []TermStart // ascending in index and in term
	// saved is how many of starts (a prefix) the stable store holds.
	saved int
	// stale: the stored list is not a prefix of this one (it was dropped
	// in memory, see restart); the next compaction rewrites it.
	stale bool
}

// termAt is the term at index by the list, if the list covers it (last
// is the log's last index).
func (t *termIndex) termAt(index, last uint64) (uint64, bool) {
	return TermList{Known: t.known, Through: max(last, t.through), Starts: t.starts}.TermAt(index)
}

// search is how many starts are at or below index.
func (t *termIndex) search(index uint64) int { return searchStarts(t.starts, index) }

// searchStarts is how many of s (ascending) are at or below index.
func searchStarts(s []TermStart, index uint64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].Index <= index {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// restart is told of the first entry stored into an empty log. The list
// goes on only when it was adopted for the snapshot that entry follows
// (through+1) and the entry's term is not below the snapshot's; otherwise
// the log knows terms from that entry on. Raft does not always reset an
// empty log when it installs a snapshot (there is nothing to delete), so an
// earlier adoption can still be here when a later install, not adopted,
// moved the log on.
func (t *termIndex) restart(index, term uint64) {
	n := len(t.starts)
	if t.known != 0 && t.through != 0 && index == t.through+1 && n > 0 && t.starts[n-1].Term <= term {
		return
	}
	*t = termIndex{stale: t.saved > 0 || t.through != 0 || t.stale}
}

// note records an appended entry: a start when its term is above the
// last start's (the log's terms never decrease).
func (t *termIndex) note(index, term uint64) {
	if t.known == 0 {
		t.known = index
	}
	if n := len(t.starts); n == 0 || t.starts[n-1].Term < term {
		t.starts = append(t.starts, TermStart{Index: index, Term: term})
	}
}

// cutFrom drops the starts at or above index (a suffix truncation).
func (t *termIndex) cutFrom(index uint64) {
	k := t.search(index - 1)
	t.starts = t.starts[:k]
	t.saved = min(t.saved, k)
}

var termsBucket = []byte("terms")

var termsKey = []byte("starts")

const termsVersion = 1

// encodeTerms is the stored list: version, known, through, count, the
// starts, and a CRC32C of everything before it.
func encodeTerms(known, through uint64, starts []TermStart) []byte {
	b := make([]byte, 0, 1+8+8+4+16*len(starts)+4)
	b = append(b, termsVersion)
	b = binary.LittleEndian.AppendUint64(b, known)
	b = binary.LittleEndian.AppendUint64(b, through)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(starts)))
	for _, s := range starts {
		b = binary.LittleEndian.AppendUint64(b, s.Index)
		b = binary.LittleEndian.AppendUint64(b, s.Term)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeTerms reads a stored list, refusing anything damaged or not a
// valid list.
func decodeTerms(b []byte) (known, through uint64, starts []TermStart, err error) {
	const head = 1 + 8 + 8 + 4
	if len(b) < head+4 || b[0] != termsVersion {
		return 0, 0, nil, fmt.Errorf("%w: stored term index: %d bytes, version %d", ErrCorrupt, len(b), firstByte(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, 0, nil, fmt.Errorf("%w: stored term index: checksum mismatch", ErrCorrupt)
	}
	known, through = binary.LittleEndian.Uint64(b[1:]), binary.LittleEndian.Uint64(b[9:])
	n := binary.LittleEndian.Uint32(b[17:])
	if uint64(len(body)-head) != 16*uint64(n) {
		return 0, 0, nil, fmt.Errorf("%w: stored term index: %d starts in %d bytes", ErrCorrupt, n, len(body)-head)
	}
	starts = make([]TermStart, n)
	for i := range starts {
		p := body[head+16*i:]
		starts[i] = TermStart{Index: binary.LittleEndian.Uint64(p), Term: binary.LittleEndian.Uint64(p[8:])}
	}
	if err := CheckTermStarts(known, starts); err != nil {
		return 0, 0, nil, fmt.Errorf("%w: stored term index: %w", ErrCorrupt, err)
	}
	return known, through, starts, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// CheckTermStarts reports whether starts is a term index: indexes and
// terms strictly ascending, none zero, none below known.
func CheckTermStarts(known uint64, starts []TermStart) error {
	for i, s := range starts {
		switch {
		case s.Index == 0 || s.Term == 0:
			return fmt.Errorf("%w: start %d: index %d term %d", ErrBadTerms, i, s.Index, s.Term)
		case s.Index < known:
			return fmt.Errorf("%w: start %d: index %d below the known index %d", ErrBadTerms, i, s.Index, known)
		case i > 0 && (s.Index <= starts[i-1].Index || s.Term <= starts[i-1].Term):
			return fmt.Errorf("%w: start %d: (index %d, term %d) after (index %d, term %d)",
				ErrBadTerms, i, s.Index, s.Term, starts[i-1].Index, starts[i-1].Term)
		}
	}
	return nil
}

// storeTerms writes the stored list (nil: clears it). Durable when it
// returns. wmu held.
func (l *Store) storeTerms(known, through uint64, starts []TermStart) error {
	if err := l.putTerms(known, through, starts); err != nil {
		return l.fail(FailWrite, fmt.Errorf("wal: store the term index: %w", err))
	}
	return nil
}

// putTerms writes the stored list (nil: clears it), durable when it
// returns, and leaves the log as it is when it fails. wmu held.
func (l *Store) putTerms(known, through uint64, starts []TermStart) error {
	return stableErr(l.stable.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(termsBucket)
		if err != nil {
			return err
		}
		if known == 0 && len(starts) == 0 && through == 0 {
			return b.Delete(termsKey)
		}
		return b.Put(termsKey, encodeTerms(known, through, starts))
	}))
}

// loadTerms rebuilds the term index at Open: the stored starts below the
// first index, then the starts of the live records. A damaged stored list
// is dropped (the log then knows terms from its first index on), never
// used.
func (l *Store) loadTerms(r *replayResult) error {
	var known, through uint64
	var stored []TermStart
	err := l.stable.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(termsBucket)
		if b == nil {
			return nil
		}
		v := b.Get(termsKey)
		if v == nil {
			return nil
		}
		var err error
		known, through, stored, err = decodeTerms(v)
		return err
	})
	if err != nil {
		l.cfg.Logger.Warn("term index dropped: the log knows the terms of its own entries only", "error", err)
		known, through, stored = 0, 0, nil
	}
	l.terms = rebuildTerms(known, through, stored, r)
	l.terms.stale = l.terms.stale || err != nil
	if !l.terms.stale {
		return nil
	}
	// A stored list Open did not use is cleared now: a later Open, after
	// entries were stored, could not tell it does not describe them.
	if err := l.putTerms(0, 0, nil); err != nil {
		return fmt.Errorf("wal: clear the stored term index: %w", err)
	}
	l.terms.stale = false
	return nil
}

// rebuildTerms is the term index Open rebuilds from the stored list and
// the live records. The stored list is used only where it must describe
// this log: its starts below the first index, when it reaches down to
// them; a list adopted for a snapshot (through) only when the log is empty
// or continues from that snapshot; never when the first record's term is
// below the list's last (a list of another history). Anything else is
// dropped, and the log knows terms from its first entry on.
func rebuildTerms(known, through uint64, stored []TermStart, r *replayResult) termIndex {
	var firstTerm uint64
	for _, ls := range r.segs {
		if len(ls.recs) > 0 {
			firstTerm = ls.recs[0].info.Term
			break
		}
	}
	use := known != 0
	switch {
	case r.first == 0:
		use = use && through != 0 // only an adoption speaks for an empty log
	case known > r.first, through != 0 && r.first != through+1:
		use = false
	}
	below := stored
	if r.first != 0 {
		below = stored[:searchStarts(stored, r.first-1)]
	}
	if n := len(below); use && n > 0 && r.first != 0 && firstTerm < below[n-1].Term {
		use = false
	}
	t := termIndex{}
	if use {
		t.known, t.through, t.starts = known, through, below
	}
	t.saved = len(t.starts)
	t.stale = !use && (known != 0 || through != 0 || len(stored) > 0)
	for _, ls := range r.segs {
		for _, rec := range ls.recs {
			t.note(rec.info.Index, rec.info.Term)
		}
	}
	return t
}

// keepTermsThrough makes the stored list hold every start at or below max
// before a compaction drops those entries. wmu held.
//
// A failed write refuses the compaction (nothing is removed; raft logs it
// and compacts again after its next snapshot) without failing the log.
func (l *Store) keepTermsThrough(max uint64) error {
	l.mu.RLock()
	t := &l.terms
	n := t.search(max)
	write := n > t.saved || t.stale || t.through != 0
	known := t.known
	starts := append([]TermStart(nil), t.starts[:n]...)
	l.mu.RUnlock()
	if !write {
		return nil
	}
	if err := l.putTerms(known, 0, starts); err != nil {
		return fmt.Errorf("wal: compaction through %d refused: store the term index: %w", max, err)
	}
	l.mu.Lock()
	// A compaction removes entries past any snapshot the list was adopted
	// for: the log itself now answers above its first index.
	l.terms.saved, l.terms.stale, l.terms.through = n, false, 0
	l.mu.Unlock()
	return nil
}

// TermAt returns the term of the log's entry at index, from the term
// index, also where the entry was compacted; false when the log does not
// know (below what it knows, or past its last entry).
func (l *Store) TermAt(index uint64) (uint64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.terms.termAt(index, l.last)
}

// TermStarts returns the term index up to through; Known is 0 when the
// log does not know the terms up to through.
func (l *Store) TermStarts(through uint64) TermList {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t := &l.terms
	if t.known == 0 || through < t.known || through > max(l.last, t.through) {
		return TermList{Through: through}
	}
	return TermList{Known: t.known, Through: through, Starts: append([]TermStart(nil), t.starts[:t.search(through)]...)}
}

// AdoptTerms takes the term index of a snapshot this log was reset for:
// list describes the history through index (the snapshot's last entry,
// whose term is term), as the member that sent the snapshot holds it. The log must be empty or start right after index (it was reset, or
// was empty), and starts must be a term index ending at or below index with
// term at index, whose last term is at most the log's first entry's. A
// refused list changes nothing. It is durable when it returns.
func (l *Store) AdoptTerms(index, term uint64, list TermList) error {
	known, starts := list.Known, list.Starts
	if err := CheckTermStarts(known, starts); err != nil {
		return err
	}
	n := len(starts)
	if known == 0 || known > index || n == 0 || starts[n-1].Index > index || starts[n-1].Term != term {
		return fmt.Errorf("%w: known %d, %d starts, for index %d term %d", ErrBadTerms, known, n, index, term)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	sh, err := l.startsAfter(index)
	if err != nil {
		return err
	}
	l.mu.RLock()
	var own []TermStart
	if sh.First != 0 {
		own = append(own, l.terms.starts[l.terms.search(index):]...)
	}
	l.mu.RUnlock()
	if len(own) > 0 {
		if own[0].Term < term {
			return fmt.Errorf("%w: the log's first entry has term %d, below the snapshot's %d", ErrBadTerms, own[0].Term, term)
		}
		if own[0].Term == term {
			own = own[1:] // the log's first entries continue the snapshot's term
		}
	}
	if err := l.storeTerms(known, index, starts); err != nil {
		return err
	}
	l.mu.Lock()
	l.terms = termIndex{known: known, through: index, starts: append(append([]TermStart(nil), starts...), own...), saved: n}
	l.mu.Unlock()
	return nil
}

// ForgetTerms drops what the term index knows at or below index, durably:
// after a snapshot install at index whose sender's term index was not
// adopted, the log must not answer for that history with an earlier one.
// It then knows terms from its first entry past index on. The log must be
// empty or start right after index.
func (l *Store) ForgetTerms(index uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	sh, err := l.startsAfter(index)
	if err != nil {
		return err
	}
	if err := l.storeTerms(0, 0, nil); err != nil {
		return err
	}
	l.mu.Lock()
	t := termIndex{}
	for _, s := range l.terms.starts[l.terms.search(index):] {
		t.note(s.Index, s.Term)
	}
	if sh.First != 0 {
		t.known = sh.First
	}
	l.terms = t
	l.mu.Unlock()
	return nil
}

// startsAfter returns the log's Shape when it is writable and empty or
// starts right after index (a snapshot's last entry). wmu held.
func (l *Store) startsAfter(index uint64) (Shape, error) {
	sh, err := l.writable()
	if err == nil && sh.First != 0 && sh.First != index+1 {
		err = fmt.Errorf("%w: the log starts at index %d, not right after %d", ErrBadTerms, sh.First, index)
	}
	return sh, err
}

// TermsThrough is the snapshot index the term index was adopted for while
// the log holds nothing past it (0: none).
func (l *Store) TermsThrough() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.last != 0 {
		return 0
	}
	return l.terms.through
}
