package walcompare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jobraft/jobraft/wal/segment"
	bolt "go.etcd.io/bbolt"
)

// OpenDir opens a member's log from disk, read-only, changing nothing:
//   - a wal log directory (holding *.seg files), or a raft.Node data dir
//     holding one under log/: read with segment.ReadOnly, which reports damaged
//     records instead of refusing, cuts no torn tail and takes no lock;
//   - a raft-boltdb/v2 file, or a directory holding one (*.db with a
//     "logs" bucket): opened with bbolt read-only (a shared lock, waited for
//     at most 2 s: a running member holding the file is an error).
func OpenDir(name, dir string) (Member, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("walcompare: %s: %w", name, err)
	}
	if !st.IsDir() {
		return openBolt(name, dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "log")} {
		if segs, _ := filepath.Glob(filepath.Join(d, "*.seg")); len(segs) > 0 {
			r, err := segment.ReadOnly(d)
			if err != nil {
				return nil, fmt.Errorf("walcompare: %s: %w", name, err)
			}
			return &walMember{name: name, r: r, info: MemberInfo{Name: name, Source: "wal", Where: d, HasFloor: true}}, nil
		}
	}
	dbs, _ := filepath.Glob(filepath.Join(dir, "*.db"))
	for _, db := range dbs {
		if isRaftBolt(db) {
			return openBolt(name, db)
		}
	}
	return nil, fmt.Errorf("walcompare: %s: %s holds neither wal segments (*.seg, or log/*.seg) nor a raft-boltdb file", name, dir)
}

type walMember struct {
	name string
	r    *segment.Reader
	info MemberInfo
}

func (m *walMember) Name() string     { return m.name }
func (m *walMember) Close() error     { return nil }
func (m *walMember) Info() MemberInfo { return m.info }

func (m *walMember) Scan(ctx context.Context, from, to uint64, fn func(uint64, *View) bool) error {
	m.info.First, m.info.Last = 0, 0
	var v View
	var n uint64
	var ctxErr error
	err := m.r.Scan(0, 0, func(rec *segment.Record) bool {
		if m.info.First == 0 {
			m.info.First = rec.Index
		}
		m.info.Last = rec.Index
		if rec.Index < from || (to != 0 && rec.Index > to) {
			return true
		}
		if n++; n&4095 == 0 {
			if ctxErr = ctx.Err(); ctxErr != nil {
				return false
			}
		}
		v = View{Present: true, Term: rec.Term, Type: rec.Type, Len: rec.DataLen, CRC: rec.DataCRC,
			Stamped: rec.Stamped, StampLen: rec.Stamp.Len, StampCRC: rec.Stamp.CRC, Corrupt: rec.Corrupt}
		if rec.Stamped && rec.Stamp.Origin == segment.StampPersist && !rec.Corrupt && !rec.Lost() {
			// The store's own stamp over an intact body: GetLog does not
			// return it, so neither does this view (online and offline
			// views of one entry are equal). A body that fails it stays
			// visible as damage.
			v.Stamped, v.StampLen, v.StampCRC = false, 0, 0
		}
		if rec.Corrupt {
			v.Detail = fmt.Sprintf("%s@%d: %s", rec.Segment, rec.Offset, rec.Detail)
		}
		return fn(rec.Index, &v)
	})
	m.info.Floor = m.r.Floor()
	m.info.Notes = m.r.Notes()
	if t := m.r.Torn(); t != nil {
		m.info.Torn = fmt.Sprintf("%s@%d: %s", t.Segment, t.Offset, t.Reason)
	}
	if err != nil {
		return fmt.Errorf("walcompare: %s: %w", m.name, err)
	}
	return ctxErr
}

var boltLogs = []byte("logs")

// isRaftBolt reports whether path is a bbolt file with raft-boltdb's logs
// bucket.
func isRaftBolt(path string) bool {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return false
	}
	defer db.Close()
	ok := false
	_ = db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(boltLogs) != nil
		return nil
	})
	return ok
}

func openBolt(name, path string) (Member, error) {
	head := make([]byte, 32)
	if f, err := os.Open(path); err == nil {
		n, _ := f.Read(head)
		f.Close()
		head = head[:n]
	}
	if !isRaftBolt(path) {
		what := "not a raft-boltdb file (no logs bucket, not bbolt, or locked by a running member)"
		if bytes.HasPrefix(head, []byte("JRWALSEG")) {
			what = "a wal segment file: give its directory"
		}
		return nil, fmt.Errorf("walcompare: %s: %s: %s", name, path, what)
	}
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("walcompare: %s: open %s: %w", name, path, err)
	}
	return &boltMember{storeMember: storeMember{name: name, s: s, info: MemberInfo{Name: name, Source: "raft-boltdb", Where: path}}, db: s}, nil
}

type boltMember struct {
	storeMember
	db *raftboltdb.BoltStore
}

func (m *boltMember) Close() error { return m.db.Close() }

// IsAddr reports whether a command-line member is a host:port address
// rather than a path: it does not exist on disk, has no slash, and ends in
// ":digits".
func IsAddr(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return false
	}
	i := strings.LastIndexByte(arg, ':')
	if i <= 0 || i == len(arg)-1 || strings.ContainsRune(arg, '/') {
		return false
	}
	for _, c := range arg[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
