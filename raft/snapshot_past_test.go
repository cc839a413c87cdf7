package raft_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/pkitest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// A member asking the leader for a snapshot past an index it cannot prove
// (its own last index, the stale one, or its floor) is refused, and the
// leader appends nothing for it: before the bound, any member could make
// the leader append up to 2^20 barriers. A legitimate request (within what
// the member shows) is granted once, and a second within the interval is
// refused as rate-limited.
func TestSnapshotPastIsBoundedByWhatTheMemberProves(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 5)
	f := (l + 1) % 3
	mux, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	call := func(req []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err := mux.Call(ctx, c.Nodes[l].Addr(), "jr.snapshot.past", req)
		return err
	}
	before := c.Nodes[l].Status().LastIndex
	far := before + 100_000
	for name, req := range map[string][]byte{
		"no member id":         binary.LittleEndian.AppendUint64(nil, far),
		"a member, unproven":   append(binary.LittleEndian.AppendUint64(nil, far), c.Cfgs[f].ID...),
		"not a member":         append(binary.LittleEndian.AppendUint64(nil, before), "intruder"...),
		"a member, past 2^20+": append(binary.LittleEndian.AppendUint64(nil, before+1<<21), c.Cfgs[f].ID...),
	} {
		err := call(req)
		var re *transport.RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("%s: %v, want a refusal", name, err)
		}
		t.Logf("%s: refused: %v", name, err)
	}
	if got := c.Nodes[l].Status().LastIndex; got > before+50 {
		t.Fatalf("the leader's log moved from %d to %d for refused requests", before, got)
	}
	// Within what the member shows: granted (a snapshot, no barriers),
	// then rate-limited.
	own := c.Nodes[f].Status().LastIndex
	ok := append(binary.LittleEndian.AppendUint64(nil, own), c.Cfgs[f].ID...)
	if err := call(ok); err != nil {
		t.Fatalf("a request within the member's own last index: %v", err)
	}
	err = call(ok)
	var re *transport.RemoteError
	if !errors.As(err, &re) || re.Code != "jr.refused" {
		t.Fatalf("a second request at once: %v, want rate-limited", err)
	}
}

// Under TLS the request's member must be the caller's: a holder of a valid
// cluster certificate issued for member y that names member x (whose own
// last index would prove more) is refused, and the leader appends nothing.
func TestSnapshotPastNamesTheCallersOwnMember(t *testing.T) {
	ca := pkitest.NewCA(t, "jobraft cluster CA")
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.TLS = ca.NodeTLS(t, cfg.ID) })
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 5)
	x, y := (l+1)%3, (l+2)%3
	evil, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0", TLS: ca.NodeTLS(t, c.Cfgs[y].ID)})
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	before := c.Nodes[l].Status().LastIndex
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := append(binary.LittleEndian.AppendUint64(nil, c.Nodes[x].Status().LastIndex), c.Cfgs[x].ID...)
	_, err = evil.Call(ctx, c.Nodes[l].Addr(), "jr.snapshot.past", req)
	var re *transport.RemoteError
	if !errors.As(err, &re) || re.Code != "jr.forbidden" {
		t.Fatalf("a request naming another member than the certificate: %v, want jr.forbidden", err)
	}
	if got := c.Nodes[l].Status().LastIndex; got > before+50 {
		t.Fatalf("the leader's log moved from %d to %d for a refused request", before, got)
	}
}

// A member whose disk lost log writes it had acknowledged (the segment
// files restored to an older copy) while its snapshot survived restarts
// with a log that ends below that snapshot. Raft continues from the
// snapshot's index + 1, which the log cannot take (every append would leave
// a gap, refused by the guard): found by the chaos soak's lie (seed 944:
// log [1,120], snapshot 276, stuck for 31 s). The node resets such a log at
// start, and the member converges.
func TestLogBelowItsSnapshotIsResetAtStart(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	proposeN(t, c, l, "a", 20)
	c.WaitConverged(wait)
	f := (l + 1) % 3
	dir := filepath.Join(c.Cfgs[f].DataDir, "log")
	segs := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	c.StopMember(f)
	old := map[string][]byte{}
	for _, p := range segs() {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		old[p] = b
	}
	c.StartMember(f)
	proposeN(t, c, c.WaitLeader(wait), "b", 100)
	c.WaitConverged(wait)
	if err := c.Nodes[f].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snap, _ := strconv.ParseUint(c.Nodes[f].Raft().Stats()["last_snapshot_index"], 10, 64)
	c.StopMember(f)
	for _, p := range segs() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	var oldLast uint64
	for p, b := range old {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if lg, err := wal.Open(dir); err != nil {
		t.Fatal(err)
	} else {
		oldLast, _ = lg.LastIndex()
		lg.Close()
	}
	if oldLast == 0 || oldLast >= snap {
		t.Fatalf("restored log ends at %d, snapshot at %d: not the shape", oldLast, snap)
	}
	c.StartMember(f)
	events, cancel := c.Nodes[f].Events(4096)
	defer cancel()
	proposeN(t, c, c.WaitLeader(wait), "c", 10)
	c.WaitConverged(wait)
	// Without the reset the guard refuses the leader's appends after the
	// snapshot (a gap), and the leader walks back one index per refusal,
	// with its failure backoff, to the log's end.
	checkNoGuardRefusals(t, "the follower", events)
	first, _ := c.Nodes[f].Log().FirstIndex()
	last, _ := c.Nodes[f].Log().LastIndex()
	if first != snap+1 || last <= snap {
		t.Fatalf("follower's log [%d, %d] after the restart, want it to start at the snapshot's %d + 1", first, last, snap)
	}
	checkCommittedPrefix(t, c)
}
