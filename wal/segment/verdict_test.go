package segment_test

// Open and the read-only Reader read segments through one frame parser
// (frames.go) and differ only in policy. On a corpus of damaged logs (the
// fuzz seed log with every fuzz variant, a byte flipped at a stride through
// each segment, and crafted damage: a payload that fails its stamp, a lost
// payload, damage followed by a torn frame), their verdicts agree:
//
//   - Open refuses the log (ErrCorrupt) exactly when the Reader reports
//     damage (a Corrupt or lost record, or a note);
//   - when Open opens it, the Reader reports a torn tail exactly when Open
//     cut one, and no record Open does not serve;
//   - record by record, every entry Open serves (with Repair when it
//     refuses, if the repair removed no later segment) is one the Reader
//     reports intact, with the same term, type, length and CRC.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// verdictCase is one log directory's segment files, by name.
type verdictCase struct {
	name  string
	files map[string][]byte
}

func verdictCorpus(t *testing.T) []verdictCase {
	t.Helper()
	segs := fuzzSegments(t)
	names := make([]string, len(segs))
	for i := range segs {
		names[i] = segment.SegName(uint64(i + 1))
	}
	var out []verdictCase
	// with returns the log whose segment k is replaced by b (and the
	// segments after it dropped when tail).
	with := func(what string, k int, b []byte, tail bool) {
		c := verdictCase{name: fmt.Sprintf("seg%d/%s", k+1, what), files: map[string][]byte{}}
		for i, s := range segs {
			switch {
			case i == k:
				c.files[names[i]] = b
			case i > k && tail:
			default:
				c.files[names[i]] = s
			}
		}
		out = append(out, c)
	}
	for k, s := range segs {
		for _, tail := range []bool{true, false} {
			if !tail && k == len(segs)-1 {
				continue
			}
			pos := "last"
			if !tail {
				pos = "mid"
			}
			for i, v := range fuzzVariants(s) {
				with(fmt.Sprintf("%s/variant%d", pos, i), k, v, tail)
			}
			for at := 0; at < len(s); at += 13 {
				b := bytes.Clone(s)
				b[at] ^= 0x10
				with(fmt.Sprintf("%s/flip@%d", pos, at), k, b, tail)
			}
			for _, cr := range craftedDamage(t, s) {
				with(pos+"/"+cr.what, k, cr.b, tail)
			}
		}
	}
	return out
}

type crafted struct {
	what string
	b    []byte
}

// craftedDamage damages the records of seg in ways a byte flip rarely
// hits: the data of the last (then the first) batch fails its stamp with
// every checksum intact, a record's data is emptied under its stamp, and a
// damaged frame header is followed by a last frame whose data fails.
func craftedDamage(t *testing.T, seg []byte) []crafted {
	t.Helper()
	s := segment.ScanBytes("seed", seg)
	if s.Bad != nil || len(s.Frames) == 0 {
		t.Fatalf("seed segment does not scan clean: %+v", s.Bad)
	}
	var out []crafted
	dataAt := func(r segment.ScanRec) (int64, int) {
		var l raft.Log
		if _, err := segment.DecodeRecord(seg[r.Off:r.Off+int64(r.Len)], &l); err != nil {
			t.Fatal(err)
		}
		return r.Off + int64(r.Len) - int64(len(l.Data)), len(l.Data)
	}
	flipData := func(b []byte, fr segment.ScanFrame) bool {
		for k := fr.First; k < fr.First+fr.Cnt; k++ {
			if at, n := dataAt(s.Recs[k]); n > 0 {
				b[at] ^= 0x01
				return true
			}
		}
		return false
	}
	var batches []segment.ScanFrame
	for _, fr := range s.Frames {
		if fr.Cnt > 0 {
			batches = append(batches, fr)
		}
	}
	if len(batches) == 0 {
		return nil
	}
	lastB, firstB := batches[len(batches)-1], batches[0]
	if b := bytes.Clone(seg); flipData(b, lastB) {
		out = append(out, crafted{"data-fails-stamp/last-batch", b})
	}
	if b := bytes.Clone(seg); flipData(b, firstB) {
		out = append(out, crafted{"data-fails-stamp/first-batch", b})
	}
	if len(batches) > 1 {
		b := bytes.Clone(seg)
		b[firstB.Off+3] ^= 0x20 // the first batch's frame magic
		if flipData(b, lastB) {
			out = append(out, crafted{"damage-then-torn-last-frame", b})
		}
	}
	return out
}

// verdictDir writes c into a new directory.
func verdictDir(t *testing.T, c verdictCase) string {
	t.Helper()
	dir := t.TempDir()
	for n, b := range c.files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func dirSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = st.Size()
	}
	return out
}

func TestOpenAndReaderAgreeOnDamagedSegments(t *testing.T) {
	cases := verdictCorpus(t)
	t.Logf("%d damaged logs", len(cases))
	refused, torn := 0, 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refusedHere, tornHere := checkVerdicts(t, c)
			if refusedHere {
				refused++
			}
			if tornHere {
				torn++
			}
		})
	}
	t.Logf("Open refused %d, the Reader found %d torn tails", refused, torn)
}

// checkVerdicts checks that Open and the Reader agree on c (see the top of
// the file) and reports whether Open refused it and the Reader found a torn
// tail.
func checkVerdicts(t *testing.T, c verdictCase) (refusedLog, tornTail bool) {
	t.Helper()
	// The Reader's verdict.
	r, err := segment.ReadOnly(verdictDir(t, c))
	if err != nil {
		t.Fatal(err)
	}
	recs := map[uint64]segment.Record{}
	damaged, why := false, ""
	if err := r.Scan(0, 0, func(rec *segment.Record) bool {
		if rec.Corrupt || rec.Lost() {
			if !damaged {
				why = fmt.Sprintf("index %d at %s@%d: %s (lost %v)", rec.Index, rec.Segment, rec.Offset, rec.Detail, rec.Lost())
			}
			damaged = true
		}
		recs[rec.Index] = *rec
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n := r.Notes(); len(n) > 0 && !damaged {
		damaged, why = true, n[0]
	}
	tornTail = r.Torn() != nil

	// Open's verdict.
	dir := verdictDir(t, c)
	before := dirSizes(t, dir)
	l, err := wal.Open(dir, wal.WithCacheSize(0))
	switch {
	case err == nil && damaged:
		l.Close()
		t.Fatalf("Open opens the log; the Reader reports damage: %s", why)
	case err != nil && !errors.Is(err, wal.ErrCorrupt):
		t.Fatalf("Open: %v", err)
	case err != nil && !damaged:
		t.Fatalf("Open refuses the log (%v); the Reader reports no damage (torn %+v)", err, r.Torn())
	case err != nil:
		refusedLog = true
	default:
		cut := false
		after := dirSizes(t, dir)
		for n, sz := range before {
			if a, ok := after[n]; !ok || a < sz {
				cut = true
			}
		}
		if cut != (r.Torn() != nil) {
			t.Fatalf("Open cut a torn tail: %v; the Reader reports a torn tail: %+v", cut, r.Torn())
		}
		last, _ := l.LastIndex()
		for ix := range recs {
			if ix > last {
				t.Fatalf("the Reader reports index %d; Open's log ends at %d", ix, last)
			}
		}
		// Record by record: Repair would keep the same log.
		defer l.Close()
		sameRecords(t, l, recs)
		return refusedLog, tornTail
	}

	// Record by record, against what Open keeps with Repair.
	l, err = wal.Open(verdictDir(t, c), wal.WithCacheSize(0), wal.Repair())
	if err != nil {
		if !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("Open with Repair: %v", err)
		}
		return refusedLog, tornTail
	}
	defer l.Close()
	if rep := l.Repaired(); rep != nil && len(rep.RemovedSegments) > 0 {
		// Repair's own policy: the segments after the cut
		// (truncations included) are gone; the Reader still
		// applies them, so the two logs differ by design.
		return refusedLog, tornTail
	}
	sameRecords(t, l, recs)
	return refusedLog, tornTail
}

// sameRecords checks every entry l serves is one the Reader reported
// intact (recs), with the same term, type, length and CRC.
func sameRecords(t *testing.T, l *wal.Log, recs map[uint64]segment.Record) {
	t.Helper()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	for ix := first; ix <= last && last != 0; ix++ {
		var e raft.Log
		if err := l.GetLog(ix, &e); err != nil {
			t.Fatalf("GetLog(%d): %v", ix, err)
		}
		rec, ok := recs[ix]
		switch {
		case !ok:
			t.Fatalf("index %d: Open serves it, the Reader does not report it", ix)
		case rec.Corrupt || rec.Lost():
			t.Fatalf("index %d: Open serves it, the Reader reports it damaged: %s", ix, rec.Detail)
		case rec.Term != e.Term || rec.Type != e.Type || rec.DataLen != uint32(len(e.Data)) || rec.DataCRC != segment.Checksum(e.Data):
			t.Fatalf("index %d: Open serves term %d type %v len %d crc %08x, the Reader reads term %d type %v len %d crc %08x",
				ix, e.Term, e.Type, len(e.Data), segment.Checksum(e.Data), rec.Term, rec.Type, rec.DataLen, rec.DataCRC)
		}
	}
}

// FuzzOpenAndReaderAgree: the agreement on arbitrary damage to the seed
// log's last segment.
//
//	go test ./wal/segment/ -run '^$' -fuzz FuzzOpenAndReaderAgree -fuzztime 10s
func FuzzOpenAndReaderAgree(f *testing.F) {
	segs := fuzzSegments(f)
	last := len(segs) - 1
	f.Add(segs[last])
	for _, v := range fuzzVariants(segs[last]) {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, seg []byte) {
		c := verdictCase{name: "fuzz", files: map[string][]byte{}}
		for i, s := range segs[:last] {
			c.files[segment.SegName(uint64(i+1))] = s
		}
		c.files[segment.SegName(uint64(last+1))] = seg
		checkVerdicts(t, c)
	})
}
