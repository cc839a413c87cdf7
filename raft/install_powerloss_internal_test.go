package raft

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// A snapshot install judged against an honest power loss, at every instant.
// hashicorp/raft v1.7.3 installs in this order: the snapshot streamed into a
// sink of the member's store and sealed (sink.Close), the state machine
// restored, the log reset (DeleteRange of all of it, allowed by the wal's
// reset bound, which the node takes from the store's Sealed event), the
// reply; then the leader appends after the snapshot. Here the member's log
// and snapshot store share one faultfs.FS that loses the power just before
// each change of the disk in turn. Reopened, and after the node's start-up
// repairs (checkRestorable, resetLogBelowSnapshot), the member must be
// restorable and continue: from the new snapshot if its sink.Close returned
// (the old log, when the loss came before the reset, dropped by the
// repair), or from its old log, intact, otherwise; and every append it
// acknowledged after the install survives.
func TestPowerLossDuringInstall(t *testing.T) {
	const oldLast, snapIndex, snapTerm = 50, 80, 2
	entries := func(a, b, term uint64) []*hraft.Log {
		var out []*hraft.Log
		for i := a; i <= b; i++ {
			out = append(out, &hraft.Log{Index: i, Term: term, Type: hraft.LogCommand, Data: []byte(fmt.Sprintf("entry %d term %d", i, term))})
		}
		return out
	}
	artifact := bytes.Repeat([]byte("state machine at 80;"), 20000)
	conf := hraft.Configuration{Servers: []hraft.Server{{Suffrage: hraft.Voter, ID: "a", Address: "127.0.0.1:1"}}}
	quiet := snapshot.WithLogger(hclog.NewNullLogger())

	// prepare leaves a member's data dir holding the old log, durable.
	prepare := func(dir string) {
		l, err := wal.Open(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.StoreLogs(entries(1, oldLast, 1)); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// install runs the install and the next append through ffs; it
	// reports what returned nil.
	type acks struct{ sealed, reset, appended bool }
	install := func(ffs *faultfs.FS, dir string) (a acks) {
		var sealedAt uint64
		store, err := snapshot.Open(filepath.Join(dir, "snapshots"), snapshot.WithFS(ffs), quiet,
			snapshot.WithEvents(func(e snapshot.Event) {
				if e.Kind == snapshot.Sealed {
					sealedAt = e.Manifest.Index
				}
			}))
		if err != nil {
			return a
		}
		l, err := wal.Open(filepath.Join(dir, "log"), wal.WithFS(ffs))
		if err != nil {
			return a
		}
		defer l.Close()
		l.SetCommitFloor(func() uint64 { return 40 }) // committed below the snapshot
		l.SetResetBound(func() uint64 { return sealedAt })
		sink, err := store.Create(1, snapIndex, snapTerm, conf, 1, nil)
		if err != nil {
			return a
		}
		if _, err := sink.Write(artifact); err != nil {
			_ = sink.Cancel()
			return a
		}
		if sink.Close() != nil {
			return a
		}
		a.sealed = true
		if l.DeleteRange(1, oldLast) != nil {
			return a
		}
		a.reset = true
		a.appended = l.StoreLogs(entries(snapIndex+1, snapIndex+5, snapTerm)) == nil
		return a
	}

	dry := t.TempDir()
	prepare(dry)
	count := faultfs.New(wal.OSFS{})
	if a := install(count, dry); !a.appended {
		t.Fatalf("the install fails without a power loss: %+v", a)
	}
	total := count.Changes()
	for at := int64(1); at <= total+1; at++ {
		dir := t.TempDir()
		prepare(dir)
		ffs := faultfs.New(wal.OSFS{})
		ffs.PowerLossAt(at)
		a := install(ffs, dir)
		cut, perr := ffs.LostBefore()
		if !ffs.Lost() {
			cut, perr = "after the append", ffs.PowerLoss()
		}
		where := fmt.Sprintf("power lost before change %d of %d (%s), acknowledged %+v", at, total, cut, a)
		if perr != nil {
			t.Fatalf("%s: PowerLoss: %v", where, perr)
		}

		// The member restarts: the node's start-up checks and repair.
		store, err := snapshot.Open(filepath.Join(dir, "snapshots"), quiet)
		if err != nil {
			t.Fatalf("%s: reopen the snapshot store: %v", where, err)
		}
		l, err := wal.Open(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatalf("%s: reopen the log: %v", where, err)
		}
		rs, err := findRestorable(store)
		if err != nil {
			t.Fatalf("%s: verify the snapshots: %v", where, err)
		}
		if err := checkRestorable(l, rs); err != nil {
			t.Fatalf("%s: not restorable: %v", where, err)
		}
		if _, _, err := resetLogBelowSnapshot(l, rs); err != nil {
			t.Fatalf("%s: start-up reset: %v", where, err)
		}
		metas, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		installed := len(metas) > 0 && metas[0].Index == snapIndex
		if a.sealed && !installed {
			t.Fatalf("%s: the installed snapshot's Close returned nil, and it is not listed", where)
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		next := uint64(oldLast + 1)
		switch {
		case installed:
			// Raft continues from the snapshot: the log is empty or holds
			// what was appended after it.
			if last != 0 && (first != snapIndex+1 || last != snapIndex+5) {
				t.Fatalf("%s: after the snapshot at %d the log holds [%d, %d]", where, snapIndex, first, last)
			}
			if a.appended && last != snapIndex+5 {
				t.Fatalf("%s: the append after the install was acknowledged; the log ends at %d", where, last)
			}
			next = max(last, snapIndex) + 1
		default:
			if first != 1 || last != oldLast {
				t.Fatalf("%s: no snapshot installed, and the old log holds [%d, %d], want [1, %d]", where, first, last, oldLast)
			}
		}
		for i := first; i <= last && last > 0; i++ {
			var e hraft.Log
			if err := l.GetLog(i, &e); err != nil {
				t.Fatalf("%s: read %d: %v", where, i, err)
			}
		}
		term := uint64(1)
		if installed {
			term = snapTerm
		}
		if err := l.StoreLogs(entries(next, next+2, term)); err != nil {
			t.Fatalf("%s: the member cannot continue at %d: %v", where, next, err)
		}
		l.Close()
	}
	t.Logf("%d changes of the disk in an install and the append after it; the power lost before each and after the last", total)
}
