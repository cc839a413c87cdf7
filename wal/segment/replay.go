package segment

import "fmt"

// liveSeg is a segment's share of the logical log after replay.
type liveSeg struct {
	sc   *scanned
	recs []scanRec // live records, contiguous indexes
}

// replayResult is the logical log rebuilt from segment files.
type replayResult struct {
	segs                  []*liveSeg // every segment file kept, in sequence order
	first, last, lastTerm uint64
	floor                 uint64
	// cutSeg, cutAt: a segment file to truncate to cutAt bytes (a torn tail,
	// or a repair cut); cutSeg is "" when nothing is cut.
	cutSeg string
	cutAt  int64
	// dropTorn: the last segment file is a torn creation; remove it.
	dropTorn bool
	// repair, set when Repair cut at damage inside the log.
	repair *RepairReport
	// removeAfter: names of segment files to remove: after a repair cut,
	// and before the last reset segment.
	removeAfter []string
}

// RepairReport says what Open with Repair cut from a damaged log.
type RepairReport struct {
	Segment string // file holding the first damaged record
	Offset  int64  // where in it the cut was made
	Reason  string
	// CutFrom is the first index removed (the log now ends at CutFrom-1);
	// CutTo the highest index seen in valid frames after the damage (0 when
	// none). Entries in [CutFrom, CutTo] were removed.
	CutFrom, CutTo uint64
	// RemovedSegments are later segment files removed whole.
	RemovedSegments []string
}

func corruptAt(s *scanned, off int64, lastGood uint64, reason string) *GuardError {
	return &GuardError{Op: OpOpen, Err: ErrCorrupt, Index: lastGood + 1, Segment: s.name, Offset: off,
		Detail: reason}
}

// replay rebuilds the logical log from scanned segments in sequence order.
func replay(segs []*scanned, repair bool) (*replayResult, error) {
	r := &replayResult{}
	truncateTo := func(n uint64) {
		for _, ls := range r.segs {
			k := len(ls.recs)
			for k > 0 && ls.recs[k-1].info.Index > n {
				k--
			}
			ls.recs = ls.recs[:k]
		}
		r.last = n
		r.lastTerm = 0
		for i := len(r.segs) - 1; i >= 0; i-- {
			if k := len(r.segs[i].recs); k > 0 {
				r.lastTerm = r.segs[i].recs[k-1].info.Term
				break
			}
		}
		if r.last < r.first {
			r.first, r.last = 0, 0
		}
	}
	// A reset segment supersedes every earlier one, but a crash during a
	// reset can leave some of them behind. Skip them, and have Open remove
	// them: once a compaction removes the reset segment they would replay
	// again (a gap, or stale entries).
	for i := len(segs) - 1; i > 0; i-- {
		if s := segs[i]; (s.bad == nil || s.bad.off != 0) && s.hdr.Flags&segFlagReset != 0 {
			for _, old := range segs[:i] {
				r.removeAfter = append(r.removeAfter, old.name)
			}
			segs = segs[i:]
			break
		}
	}
	var mark uint64      // the highest first-index mark since the last reset
	var markSeg *scanned // the segment holding it
	for i, s := range segs {
		isLast := i == len(segs)-1
		if s.bad != nil && s.bad.off == 0 {
			if isLast && s.bad.torn {
				r.dropTorn = true
				break
			}
			if !repair {
				return nil, corruptAt(s, 0, r.last, "segment header: "+s.bad.reason)
			}
			// Repair: cut here, this segment and every later one go.
			rep := &RepairReport{Segment: s.name, Offset: 0, Reason: "segment header: " + s.bad.reason, CutFrom: r.last + 1}
			for _, later := range segs[i:] {
				rep.RemovedSegments = append(rep.RemovedSegments, later.name)
				if n := len(later.recs); n > 0 {
					rep.CutTo = max(rep.CutTo, later.recs[n-1].info.Index)
				}
			}
			r.repair = rep
			r.removeAfter = append(r.removeAfter, rep.RemovedSegments...)
			break
		}
		r.floor = max(r.floor, s.floor)
		switch {
		case s.hdr.Flags&segFlagReset != 0:
			r.segs = nil
			r.first, r.last, r.lastTerm = 0, 0, 0
			mark, markSeg = 0, nil
		case r.last == 0:
		case s.hdr.Base <= r.last:
			truncateTo(s.hdr.Base - 1)
		case s.hdr.Base != r.last+1:
			return nil, corruptAt(s, 0, r.last, fmt.Sprintf("segment base %d leaves a gap after index %d", s.hdr.Base, r.last))
		}
		ls := &liveSeg{sc: s}
		r.segs = append(r.segs, ls)
		for k, rec := range s.recs {
			ix := rec.info.Index
			switch {
			case r.last == 0:
				if k == 0 && s.hdr.Base != 0 && ix != s.hdr.Base {
					return nil, corruptAt(s, rec.off, r.last, fmt.Sprintf("first index %d, segment base %d", ix, s.hdr.Base))
				}
				r.first = ix
			case ix != r.last+1:
				return nil, corruptAt(s, rec.off, r.last, fmt.Sprintf("index %d follows %d", ix, r.last))
			}
			if rec.info.Term < r.lastTerm {
				return nil, corruptAt(s, rec.off, r.last, fmt.Sprintf("term %d after term %d", rec.info.Term, r.lastTerm))
			}
			ls.recs = append(ls.recs, rec)
			r.last, r.lastTerm = ix, rec.info.Term
		}
		// A first-index mark follows the records it compacts, in the same
		// segment or a later one; no truncation cuts below it (only above
		// the floor, and a compaction reaches no higher than the floor),
		// and a later reset discards it with everything before.
		// A segment may hold a mark and no record of its own (its records
		// all compacted into later marks, or it was just created), so the
		// mark is checked against the whole log's last index, below.
		if m := s.firstMark; m > mark {
			mark, markSeg = m, s
		}
		if s.bad == nil {
			continue
		}
		if isLast && s.bad.torn {
			r.cutSeg, r.cutAt = s.name, s.bad.off
			continue
		}
		if !repair {
			return nil, corruptAt(s, s.bad.off, r.last, s.bad.reason)
		}
		rep := &RepairReport{Segment: s.name, Offset: s.bad.off, Reason: s.bad.reason, CutFrom: r.last + 1, CutTo: s.afterMax}
		for _, later := range segs[i+1:] {
			rep.RemovedSegments = append(rep.RemovedSegments, later.name)
			if n := len(later.recs); n > 0 {
				rep.CutTo = max(rep.CutTo, later.recs[n-1].info.Index)
			}
		}
		r.repair = rep
		r.removeAfter = append(r.removeAfter, rep.RemovedSegments...)
		r.cutSeg, r.cutAt = s.name, s.bad.off
		break
	}
	if mark != 0 {
		if mark > r.last {
			return nil, corruptAt(markSeg, 0, r.last, fmt.Sprintf("first-index mark %d beyond the last index %d", mark, r.last))
		}
		r.first = max(r.first, mark)
	}
	// Entries below the first index were compacted: they stay in their
	// files (until a compaction removes the whole file) but are not live.
	for _, ls := range r.segs {
		k := 0
		for k < len(ls.recs) && ls.recs[k].info.Index < r.first {
			k++
		}
		ls.recs = ls.recs[k:]
	}
	return r, nil
}
