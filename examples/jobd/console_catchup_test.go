package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
)

// The cluster page's catch-up column shows the leader's catch-up policy
// where it reported one (stalled and diverged with the reason, a snapshot
// or log stream with its rate and ETA) and the member's own status
// otherwise.
func TestConsoleCatchUpColumnFollowsTheLeadersPolicy(t *testing.T) {
	up := memberRow{ID: "n4", Up: true, Voter: false}
	st := &client.Status{}
	st.LeaderID = "n1"
	cases := []struct {
		name string
		row  memberRow
		p    *raft.MemberProgress
		want []string
	}{
		{"stalled", up, &raft.MemberProgress{State: raft.StateStalled, Reason: "too_slow", Detail: "4 rounds"}, []string{"stalled: too_slow (4 rounds)"}},
		{"diverged", up, &raft.MemberProgress{State: raft.StateDiverged, Reason: "diverged"}, []string{"diverged"}},
		{"snapshot", up, &raft.MemberProgress{State: raft.StateCatchingUp, Installing: true, SnapshotSize: 1000, SnapshotBytesRemaining: 400, BytesPerSecond: 200, ETA: 2 * time.Second},
			[]string{"snapshot", "400 of 1000 bytes left", "200 B/s", "done in about 2s"}},
		{"log", up, &raft.MemberProgress{State: raft.StateCatchingUp, Lag: 50, EntriesPerSecond: 25, ETA: -1}, []string{"catching up: 50 entries behind, 25 entries/s"}},
		{"down wins", memberRow{ID: "n4", Error: "dial: connection refused"}, &raft.MemberProgress{State: raft.StateStalled}, []string{"down: dial"}},
		{"no report: own status", up, nil, []string{"non-voter: catching up"}},
	}
	// A member that knows no leader is never "caught up".
	noLeader := &client.Status{}
	noLeader.AppliedIndex, noLeader.CommitIndex = 7, 7
	if got := catchUpOf(memberRow{ID: "n1", Up: true, Voter: true}, noLeader, nil); got != "no leader known: cannot tell (applied 7, its commit 7)" {
		t.Errorf("no leader: %q", got)
	}
	for _, tc := range cases {
		got := catchUpOf(tc.row, st, tc.p)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
