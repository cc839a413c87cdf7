package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestZZInspect(t *testing.T) {
	dir := os.Getenv("INSPECT")
	if dir == "" {
		t.Skip()
	}
	names, _, _ := segmentFiles(OSFS{}, dir)
	for _, n := range names {
		s, _ := scanSegment(OSFS{}, filepath.Join(dir, n))
		lo, hi := uint64(0), uint64(0)
		if len(s.recs) > 0 {
			lo, hi = s.recs[0].info.Index, s.recs[len(s.recs)-1].info.Index
		}
		bad := ""
		if s.bad != nil {
			bad = fmt.Sprintf("bad@%d torn=%v %s", s.bad.off, s.bad.torn, s.bad.reason)
		}
		fmt.Printf("%s size=%d flags=%d base=%d floor=%d recs=[%d,%d] frames=%d %s\n", n, s.size, s.hdr.Flags, s.hdr.Base, s.hdr.Floor, lo, hi, len(s.frames), bad)
	}
}

func TestZZFrames(t *testing.T) {
	for _, n := range []uint64{100, 105, 110, 115, 120} {
		dir := t.TempDir()
		corWrite(t, dir, n)
		names, _, _ := segmentFiles(OSFS{}, dir)
		var fr []int
		for _, nm := range names {
			s, _ := scanSegment(OSFS{}, filepath.Join(dir, nm))
			fr = append(fr, len(s.frames))
		}
		fmt.Println(n, fr)
	}
}
