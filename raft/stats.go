package raft

import (
	"strconv"

	hraft "github.com/hashicorp/raft"
)

// raftStats is what the node reads from hashicorp/raft's Stats, the one
// place its strings are parsed. hashicorp/raft exposes its cached last
// entry's term and its latest snapshot only there.
type raftStats struct {
	LastLogIndex, LastLogTerm           uint64 // raft's cached last entry
	LastSnapshotIndex, LastSnapshotTerm uint64 // raft's latest snapshot
}

// statsOf reads r.Stats (it takes raft's locks briefly, never its main
// loop). A missing or malformed value reads as 0.
func statsOf(r *hraft.Raft) raftStats {
	st := r.Stats()
	num := func(k string) uint64 { v, _ := strconv.ParseUint(st[k], 10, 64); return v }
	return raftStats{
		LastLogIndex: num("last_log_index"), LastLogTerm: num("last_log_term"),
		LastSnapshotIndex: num("last_snapshot_index"), LastSnapshotTerm: num("last_snapshot_term"),
	}
}
