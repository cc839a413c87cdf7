package wal

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

// ErrBadTerms is returned by AdoptTerms for a list that is not a term
// index of the log it would describe.
var ErrBadTerms = errors.New("wal: not a valid term index for this log")

// termIndex is the log's term starts, under segStore.mu.
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
}

// termAt is the term at index by the list, if the list covers it (last
// is the log's last index).
func (t *termIndex) termAt(index, last uint64) (uint64, bool) {
	if t.known == 0 || index < t.known || index > max(last, t.through) {
		return 0, false
	}
	k := t.search(index)
	if k == 0 {
		return 0, false
	}
	return t.starts[k-1].Term, true
}

// search is how many starts are at or below index.
func (t *termIndex) search(index uint64) int {
	lo, hi := 0, len(t.starts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.starts[m].Index <= index {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
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
func (l *segStore) storeTerms(known, through uint64, starts []TermStart) error {
	err := l.stable.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(termsBucket)
		if err != nil {
			return err
		}
		if known == 0 && len(starts) == 0 && through == 0 {
			return b.Delete(termsKey)
		}
		return b.Put(termsKey, encodeTerms(known, through, starts))
	})
	if err != nil {
		return l.fail(FailWrite, fmt.Errorf("wal: store the term index: %w", stableErr(err)))
	}
	return nil
}

// loadTerms rebuilds the term index at Open: the stored starts below the
// first index, then the starts of the live records. A damaged stored list
// is dropped (the log then knows terms from its first index on), never
// used.
func (l *segStore) loadTerms(r *replayResult) {
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
		l.opts.logger.Warn("term index dropped: the log knows the terms of its own entries only", "error", err)
		known, through, stored = 0, 0, nil
	}
	t := termIndex{}
	if r.first != 0 {
		if known == 0 || known > r.first {
			known = 0 // nothing stored covers the entries before the first
		} else {
			t.known, t.through = known, through
			t.starts = stored[:searchStarts(stored, r.first-1)]
			t.saved = len(t.starts)
		}
		for _, ls := range r.segs {
			for _, rec := range ls.recs {
				t.note(rec.info.Index, rec.info.Term)
			}
		}
	} else if known != 0 {
		// An empty log after AdoptTerms: the list answers through the
		// snapshot it was adopted for.
		t = termIndex{known: known, through: through, starts: stored, saved: len(stored)}
	}
	l.terms = t
}

func searchStarts(s []TermStart, index uint64) int {
	t := termIndex{starts: s}
	return t.search(index)
}

// keepTermsThrough makes the stored list hold every start at or below max
// before a compaction drops those entries. wmu held.
func (l *segStore) keepTermsThrough(max uint64) error {
	l.mu.RLock()
	n := l.terms.search(max)
	saved := l.terms.saved
	known := l.terms.known
	starts := append([]TermStart(nil), l.terms.starts[:n]...)
	l.mu.RUnlock()
	if n <= saved {
		return nil
	}
	if err := l.storeTerms(known, 0, starts); err != nil {
		return err
	}
	l.mu.Lock()
	l.terms.saved = n
	l.mu.Unlock()
	return nil
}

// TermAt returns the term of the log's entry at index, from the term
// index, also where the entry was compacted; false when the log does not
// know (below what it knows, or past its last entry).
func (l *segStore) TermAt(index uint64) (uint64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.terms.termAt(index, l.last)
}

// TermStarts returns the term index up to through: the lowest index it
// answers for and the starts at or below through. false when the log does
// not know the terms up to through.
func (l *segStore) TermStarts(through uint64) (known uint64, starts []TermStart, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t := &l.terms
	if t.known == 0 || through < t.known || through > max(l.last, t.through) {
		return 0, nil, false
	}
	return t.known, append([]TermStart(nil), t.starts[:t.search(through)]...), true
}

// AdoptTerms takes the term index of a snapshot this log was reset for:
// known and starts describe the history through index (the snapshot's last
// entry, whose term is term), as the member that sent the snapshot holds
// it. The log must hold no entry at or below index (it was reset, or is
// empty), and starts must be a term index ending at or below index with
// term at index, whose last term is at most the log's first entry's. A
// refused list changes nothing. It is durable when it returns.
func (l *segStore) AdoptTerms(index, term, known uint64, starts []TermStart) error {
	if err := CheckTermStarts(known, starts); err != nil {
		return err
	}
	n := len(starts)
	if known == 0 || known > index || n == 0 || starts[n-1].Index > index || starts[n-1].Term != term {
		return fmt.Errorf("%w: known %d, %d starts, for index %d term %d", ErrBadTerms, known, n, index, term)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	sh, err := l.writable()
	if err != nil {
		return err
	}
	if sh.First != 0 && sh.First <= index {
		return fmt.Errorf("%w: the log holds index %d, at or below the snapshot's %d", ErrBadTerms, sh.First, index)
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
