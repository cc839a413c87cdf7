package raft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// A member returns after the leader compacted its log past it, and the
// leader's snapshot artifact was corrupted on disk after it was sealed
// (a bit flipped in its middle: the length is right, so the store's cheap
// checks pass). The leader streams it, the stream ends in the store's
// refusal before its final bytes, and the member never receives the whole
// snapshot: every install fails (counted: the leader names the member
// stalled, install_failing), the member's state is not replaced (it keeps
// the keys it had, its applied index and its last snapshot), and nothing
// acknowledged is lost. Once the leader takes a new, intact snapshot, the
// install succeeds and the member converges.
func TestCorruptLeaderSnapshotFailsTheInstallAndReplacesNothing(t *testing.T) {
	faults := faultnet.New(time.Now().UnixNano())
	c := clustertest.StartNodes(t, 3, faults, func(cfg *raft.Config) {
		cfg.TrailingLogs = 8
		cfg.CatchUp = catchup.Policy{UnreachableRounds: 1 << 20, NoProgressRounds: 1 << 20}
	})
	l := c.WaitLeader(wait)
	gone := (l + 1) % 3
	id := c.Cfgs[gone].ID
	proposeN(t, c, l, "a", 20)
	c.WaitConverged(wait)
	held, applied := c.KVs[gone].Len(), c.Nodes[gone].Status().AppliedIndex
	snapBefore := c.Nodes[gone].Raft().Stats()["last_snapshot_index"]

	faults.Isolate(addr(c.Nodes[gone]))
	for k := range 100 {
		proposeAcrossChurn(t, c, l, fmt.Sprintf("b%d=%s", k, make([]byte, 2048)), wait)
	}
	l = c.WaitLeader(wait)
	if l == gone {
		t.Fatal("the isolated member leads")
	}
	// Both members that hold the log snapshot, compact past the isolated
	// member, and have their snapshot corrupted after it was sealed: a
	// leader change (the machine's stalls can cost the leader its lease)
	// must not let the member catch up from an intact log instead.
	for i := range 3 {
		if i == gone {
			continue
		}
		f := c.Nodes[i].Raft().Snapshot()
		if err := f.Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", c.Cfgs[i].ID, err)
		}
		if first := c.Nodes[i].Status().FirstIndex; first <= applied+1 {
			t.Fatalf("%s's log starts at %d: no install would be needed", c.Cfgs[i].ID, first)
		}
		meta, rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		flipMiddle(t, filepath.Join(c.Cfgs[i].DataDir, "snapshots", meta.ID, "state.bin"))
	}

	faults.Heal()
	var p raft.MemberProgress
	clustertest.WaitFor(t, wait, "the leader to name the member install_failing", func() bool {
		for i := range 3 {
			if i == gone || c.Nodes[i].Raft().State() != hraft.Leader {
				continue
			}
			q, ok := progressOf(c.Nodes[i].Status(), id)
			if ok && q.State == raft.StateStalled && q.Reason == string(catchup.ReasonInstallFailing) {
				p = q
				return true
			}
		}
		return false
	})
	if p.SnapshotBytesSent == 0 {
		t.Fatalf("no snapshot byte was streamed: %+v", p)
	}
	// Nothing replaced on the member.
	if n := c.KVs[gone].Len(); n != held {
		t.Fatalf("%s holds %d keys after the failed installs, had %d", id, n, held)
	}
	if a := c.Nodes[gone].Status().AppliedIndex; a != applied {
		t.Fatalf("%s applied index %d after the failed installs, was %d", id, a, applied)
	}
	if s := c.Nodes[gone].Raft().Stats()["last_snapshot_index"]; s != snapBefore {
		t.Fatalf("%s last snapshot %s after the failed installs, was %s", id, s, snapBefore)
	}
	// Nothing acknowledged lost: the majority holds every key and serves.
	for i := range 3 {
		if i != gone && c.KVs[i].Len() != 120 {
			t.Fatalf("%s holds %d keys, want 120", c.Cfgs[i].ID, c.KVs[i].Len())
		}
	}
	l = c.WaitLeader(wait)
	proposeN(t, c, l, "c", 10)
	// Repaired by a new, intact snapshot on both members that could lead:
	// the install succeeds.
	for i := range 3 {
		if i == gone {
			continue
		}
		if err := c.Nodes[i].Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", c.Cfgs[i].ID, err)
		}
	}
	c.WaitConverged(wait)
	for i := range 3 {
		if n := c.KVs[i].Len(); n != 130 {
			t.Fatalf("%s holds %d keys, want 130", c.Cfgs[i].ID, n)
		}
	}
	if s, _ := strconv.ParseUint(c.Nodes[gone].Raft().Stats()["last_snapshot_index"], 10, 64); s == 0 {
		t.Fatalf("%s converged without an install", id)
	}
}

// flipMiddle flips a bit in the middle of the file at path.
func flipMiddle(t *testing.T, path string) {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf[len(buf)/2] ^= 0x10
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}
