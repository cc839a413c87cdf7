package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/jobraft/jobraft/wal/vfs"
)

// Open's replay of a log directory: list the segments, scan them (scan.go),
// replay them (replay.go) and apply what replay decided.

// segmentFiles lists the segment files of dir in sequence order.
func segmentFiles(fs vfs.FS, dir string) ([]string, []uint64, error) {
	names, err := fs.ReadDirNames(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var seqs []uint64
	for _, n := range names {
		if seq, ok := parseSegName(n); ok {
			out = append(out, n)
			seqs = append(seqs, seq)
		}
	}
	sort.Sort(bySeq{out, seqs})
	return out, seqs, nil
}

type bySeq struct {
	names []string
	seqs  []uint64
}

func (b bySeq) Len() int           { return len(b.names) }
func (b bySeq) Less(i, j int) bool { return b.seqs[i] < b.seqs[j] }
func (b bySeq) Swap(i, j int) {
	b.names[i], b.names[j] = b.names[j], b.names[i]
	b.seqs[i], b.seqs[j] = b.seqs[j], b.seqs[i]
}

func (l *Store) load() error {
	fs := l.cfg.FS
	names, seqs, err := segmentFiles(fs, l.dir)
	if err != nil {
		return err
	}
	scans := make([]*scanned, len(names))
	for i, n := range names {
		s, err := scanSegment(fs, filepath.Join(l.dir, n))
		if err != nil {
			return fmt.Errorf("wal: read segment %s: %w", n, err)
		}
		s.name = n
		if s.bad == nil || s.bad.off != 0 {
			if s.hdr.Seq != seqs[i] {
				return &GuardError{Op: OpOpen, Err: ErrCorrupt, Segment: n, Detail: fmt.Sprintf("header sequence %d differs from file name", s.hdr.Seq)}
			}
		}
		scans[i] = s
	}
	r, err := replay(scans, l.cfg.Repair)
	if err != nil {
		var ge *GuardError
		if errors.As(err, &ge) {
			ge.First, ge.Last = 0, 0
		}
		l.refused(err)
		return err
	}
	if len(seqs) > 0 {
		l.nextSeq = seqs[len(seqs)-1] + 1
	} else {
		l.nextSeq = 1
	}
	// Apply what replay decided: drop a torn segment creation, cut a torn
	// tail or a repaired spot, remove segments after a repair cut.
	if r.dropTorn {
		last := names[len(names)-1]
		l.cfg.Logger.Warn("removing torn segment creation", "segment", last)
		if err := fs.Remove(filepath.Join(l.dir, last)); err != nil {
			return err
		}
	}
	for _, n := range r.removeAfter {
		if err := fs.Remove(filepath.Join(l.dir, n)); err != nil {
			return err
		}
	}
	if r.cutSeg != "" {
		l.cfg.Logger.Warn("cutting log tail", "segment", r.cutSeg, "offset", r.cutAt, "repair", r.repair != nil)
		if err := truncateFile(fs, filepath.Join(l.dir, r.cutSeg), r.cutAt); err != nil {
			return err
		}
	}
	if r.dropTorn || len(r.removeAfter) > 0 {
		if err := fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	l.repaired = r.repair
	l.first, l.last, l.lastTerm = r.first, r.last, r.lastTerm
	if err := l.loadTerms(r); err != nil {
		return err
	}
	l.setDurableLocked()
	l.floor.Raise(r.floor)
	for i, ls := range r.segs {
		tail := i == len(r.segs)-1
		flag := os.O_RDONLY
		if tail {
			flag = os.O_RDWR
		}
		path := filepath.Join(l.dir, ls.sc.name)
		f, err := fs.OpenFile(path, flag, 0o600)
		if err != nil {
			l.closeFiles()
			return err
		}
		seg := &segment{seq: ls.sc.hdr.Seq, path: path, f: f, size: ls.sc.end, alloc: ls.sc.size, version: ls.sc.hdr.Version}
		if ls.sc.name == r.cutSeg {
			seg.size, seg.alloc = r.cutAt, r.cutAt
		}
		if len(ls.recs) > 0 {
			seg.base = ls.recs[0].info.Index
		} else if ls.sc.hdr.Flags&segFlagReset == 0 {
			seg.base = ls.sc.hdr.Base
		}
		for _, rec := range ls.recs {
			seg.offs = append(seg.offs, uint32(rec.off))
			seg.lens = append(seg.lens, rec.len)
		}
		l.segs = append(l.segs, seg)
	}
	if len(l.segs) == 0 {
		seg, err := l.createSegment(0, segFlagReset)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, seg)
	}
	return nil
}

func truncateFile(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
