package snapshot

// The store judged against an honest power loss (wal/faultfs PowerLoss:
// what was fsynced stays, the rest is gone), at every instant of a seal:
// a snapshot whose Close returned nil survives; one that did not leaves the
// previous snapshot the newest, and never a half-published directory the
// store would list or open.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

var _ FS = (*faultfs.FS)(nil)

// artifact is n deterministic bytes for snapshot k.
func artifact(k byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(k)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// putErr writes one snapshot as raft does and returns its ID and the first
// error of Create, Write or Close (a failed Write cancels the sink).
func putErr(s *Store, index, term uint64, data []byte) (string, error) {
	sk, err := s.Create(1, index, term, testConfiguration(), 1, nil)
	if err != nil {
		return "", err
	}
	for len(data) > 0 {
		n := min(len(data), 64<<10)
		if _, err := sk.Write(data[:n]); err != nil {
			_ = sk.Cancel()
			return sk.ID(), err
		}
		data = data[n:]
	}
	return sk.ID(), sk.Close()
}

// readBack opens snapshot id of s and reads it to EOF through the
// verifying reader.
func readBack(t *testing.T, s *Store, id, where string) []byte {
	t.Helper()
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatalf("%s: open %s: %v", where, id, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatalf("%s: read %s: %v", where, id, err)
	}
	return buf.Bytes()
}

// A second snapshot is sealed through a faultfs.FS that loses the power
// just before each of its changes of the disk in turn (and after the last:
// right after Close returned). The first one was sealed before. Reopened
// with the os: nothing is refused (no half-published directory), no
// leftover is listed, a snapshot whose Close returned nil is the newest and
// reads back, otherwise the newest is the first one or, whole, the second;
// every listed snapshot reads back as written.
func TestPowerLossDuringSeal(t *testing.T) {
	for _, retain := range []int{1, 2} {
		t.Run(fmt.Sprintf("retain %d", retain), func(t *testing.T) {
			quiet := WithLogger(hclog.NewNullLogger())
			first, second := artifact(1, 300<<10), artifact(2, 2500<<10)
			prepare := func(dir string) string {
				s, err := Open(dir, WithRetain(retain), quiet)
				if err != nil {
					t.Fatal(err)
				}
				id, err := putErr(s, 10, 1, first)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			seal := func(ffs *faultfs.FS, dir string) (string, error) {
				s, err := Open(dir, WithFS(ffs), WithRetain(retain), quiet)
				if err != nil {
					return "", err
				}
				return putErr(s, 20, 2, second)
			}
			dry := filepath.Join(t.TempDir(), "snapshots")
			prepare(dry)
			count := faultfs.New(wal.OSFS{})
			if _, err := seal(count, dry); err != nil {
				t.Fatal(err)
			}
			total := count.Changes()
			for at := int64(1); at <= total+1; at++ {
				dir := filepath.Join(t.TempDir(), "snapshots")
				id1 := prepare(dir)
				ffs := faultfs.New(wal.OSFS{})
				ffs.PowerLossAt(at)
				id2, err := seal(ffs, dir)
				cut, perr := ffs.LostBefore()
				if !ffs.Lost() {
					cut, perr = "after Close returned", ffs.PowerLoss()
				}
				where := fmt.Sprintf("power lost before change %d of %d (%s); Close: %v", at, total, cut, err)
				if perr != nil {
					t.Fatalf("%s: PowerLoss: %v", where, perr)
				}
				ev := &events{}
				s, oerr := Open(dir, WithRetain(retain), WithEvents(ev.add), quiet)
				if oerr != nil {
					t.Fatalf("%s: reopen: %v", where, oerr)
				}
				metas, lerr := s.List()
				if lerr != nil {
					t.Fatalf("%s: list: %v", where, lerr)
				}
				if bad := ev.of(Refused); len(bad) > 0 {
					t.Fatalf("%s: a published snapshot is refused (half-published): %v", where, bad[0].Err)
				}
				ents, rerr := os.ReadDir(dir)
				if rerr != nil {
					t.Fatal(rerr)
				}
				for _, e := range ents {
					if n := e.Name(); strings.HasSuffix(n, tmpSuffix) || strings.HasSuffix(n, trashSuffix) || strings.HasPrefix(n, ".faultfs-") {
						t.Fatalf("%s: %s left in the store after reopening", where, n)
					}
				}
				if len(metas) == 0 {
					t.Fatalf("%s: no snapshot listed; %s was sealed before", where, id1)
				}
				newest := metas[0].ID
				switch {
				case err == nil && newest != id2:
					t.Fatalf("%s: newest is %s, but Close of %s returned nil", where, newest, id2)
				case newest != id1 && newest != id2:
					t.Fatalf("%s: newest is %s, neither %s nor %s", where, newest, id1, id2)
				}
				for _, m := range metas {
					want := first
					if m.ID == id2 {
						want = second
					}
					if got := readBack(t, s, m.ID, where); !bytes.Equal(got, want) {
						t.Fatalf("%s: %s reads back %d bytes other than the %d written", where, m.ID, len(got), len(want))
					}
				}
			}
			t.Logf("%d changes of the disk per seal; the power lost before each and after the last", total)
		})
	}
}

// The Sealed event, from which the node takes the wal's reset bound (the
// log may then be reset for this snapshot), means the snapshot is durable:
// the power lost inside the event's callback keeps it.
func TestSealedEventMeansDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snapshots")
	ffs := faultfs.New(wal.OSFS{})
	var lossErr error
	s, err := Open(dir, WithFS(ffs), WithLogger(hclog.NewNullLogger()), WithEvents(func(e Event) {
		if e.Kind == Sealed {
			lossErr = ffs.PowerLoss()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	data := artifact(3, 1<<20)
	id, err := putErr(s, 30, 3, data)
	if err != nil {
		t.Fatal(err)
	}
	if lossErr != nil || !ffs.Lost() {
		t.Fatalf("no power loss in the Sealed callback: %v", lossErr)
	}
	r, err := Open(dir, WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	metas, err := r.List()
	if err != nil || len(metas) != 1 || metas[0].ID != id {
		t.Fatalf("after the loss: %v (err %v), want %s", metas, err, id)
	}
	if got := readBack(t, r, id, "after the loss"); !bytes.Equal(got, data) {
		t.Fatalf("%s reads back %d bytes other than the %d written", id, len(got), len(data))
	}
}

// WithFS refuses a nil file system.
func TestWithFSRefusesNil(t *testing.T) {
	if _, err := Open(t.TempDir(), WithFS(nil)); err == nil {
		t.Fatal("Open with a nil file system succeeded")
	}
}
