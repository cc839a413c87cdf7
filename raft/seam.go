package raft

import (
	metrics "github.com/hashicorp/go-metrics/compat"
)

// commitClamped is the seam's report that an incoming append carried a
// leader commit index past the last entry it verified, and was clamped
// (transport.Seam; docs/upstream.md U1). It is not an error: a leader may
// legitimately know a higher commit index than what it has sent this
// follower so far. It is counted, because a member that sees many is being
// sent appends that hashicorp/raft alone would have let it commit too far.
func (n *Node) commitClamped(leaderCommit, clamped uint64) {
	n.clamps.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "commit_clamped"}, 1)
	n.cfg.Logger.Named("seam").Debug("append commit index clamped to the last verified entry",
		"leader-commit", leaderCommit, "clamped-to", clamped)
}
