package segment

import (
	"errors"
	"testing"
)

// A segment can hold a first-index mark and no record of its own: all the
// segments before it were compacted away, and the log continues in the
// next one (a crash test left exactly that: a 96-byte segment holding its
// header and a mark, then the rest of the log). Open used to check the mark
// against the records replayed so far — none — and refused to open a log
// that was whole ("first-index mark 1010 beyond the last index 0"). The
// mark is checked against the whole log's last index.
func TestReplayMarkInASegmentWithoutRecords(t *testing.T) {
	recs := func(from, to uint64) []scanRec {
		var out []scanRec
		for i := from; i <= to; i++ {
			out = append(out, scanRec{info: recordInfo{Index: i, Term: 3}})
		}
		return out
	}
	segs := []*scanned{
		{name: "88", hdr: segHeader{Version: firstMarkVersion, Base: 1010}, firstMark: 1010},
		{name: "89", hdr: segHeader{Version: firstMarkVersion, Base: 1010}, recs: recs(1010, 1020)},
	}
	r, err := replay(segs, false)
	if err != nil {
		t.Fatalf("replay of a whole log with a record-less marked segment: %v", err)
	}
	if r.first != 1010 || r.last != 1020 {
		t.Fatalf("replayed [%d, %d], want [1010, 1020]", r.first, r.last)
	}

	// A mark past everything the log holds is still damage.
	segs[0].firstMark = 1021
	if _, err := replay(segs, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replay with a mark past the last index: %v, want ErrCorrupt", err)
	}
}
