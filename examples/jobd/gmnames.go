package main

import (
	"strings"
	"unicode"

	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
)

// gmFamily says how one go-metrics key is exported to Prometheus.
type gmFamily struct {
	name  string            // Prometheus name: base units, counters end in _total
	help  string            // HELP text
	scale float64           // multiplies each value (1e-3: go-metrics' milliseconds to seconds)
	fixed map[string]string // labels taken from the key (e.g. raft.state.leader: state="leader")
}

// gmUndocumented starts the HELP of a key missing from the tables; the
// metrics test fails on it, so a new key gets its description.
const gmUndocumented = "Undocumented go-metrics key "

// raftFamilies are hashicorp/raft v1.7.3's keys. Its timers and
// lastContact are milliseconds: exported in seconds. Keys that repeat a
// labelled metric with the peer ID inside the name are in raftPeerKeys and
// dropped: the labelled one carries the peer as a label.
var raftFamilies = map[string]gmFamily{
	"raft.apply":         {name: "raft_apply_total", help: "Commands handed to raft's Apply on this member (leader only)."},
	"raft.barrier":       {name: "raft_barrier_total", help: "Barriers issued by this member (leader only)."},
	"raft.verify_leader": {name: "raft_verify_leader_total", help: "Leadership verifications (quorum heartbeats for linearizable reads)."},
	"raft.restore":       {name: "raft_user_restore_total", help: "User snapshot restores started on this member."},
	"raft.state.follower": {name: "raft_state_changes_total", help: "Transitions of this member into a raft state, by state.",
		fixed: map[string]string{"state": "follower"}},
	"raft.state.candidate": {name: "raft_state_changes_total", help: "Transitions of this member into a raft state, by state.",
		fixed: map[string]string{"state": "candidate"}},
	"raft.state.leader": {name: "raft_state_changes_total", help: "Transitions of this member into a raft state, by state.",
		fixed: map[string]string{"state": "leader"}},
	"raft.transition.heartbeat_timeout": {name: "raft_transitions_total", help: "Step-downs and elections started, by reason.",
		fixed: map[string]string{"reason": "heartbeat_timeout"}},
	"raft.transition.leader_lease_timeout": {name: "raft_transitions_total", help: "Step-downs and elections started, by reason.",
		fixed: map[string]string{"reason": "leader_lease_timeout"}},
	"raft.peers":                  {name: "raft_peers", help: "Servers in the latest raft configuration (leader only)."},
	"raft.commitNumLogs":          {name: "raft_commit_entries", help: "Entries committed by the leader's last commit-index advance."},
	"raft.leader.dispatchNumLogs": {name: "raft_leader_dispatch_entries", help: "Entries the leader wrote in its last local log dispatch."},
	"raft.fsm.applyBatchNum":      {name: "raft_fsm_apply_batch_entries", help: "Entries per batch handed to the state machine."},
	"raft.thread.main.saturation": {name: "raft_thread_saturation_ratio", help: "Fraction of time a raft goroutine was busy (0 to 1), by thread.",
		fixed: map[string]string{"thread": "main"}},
	"raft.thread.fsm.saturation": {name: "raft_thread_saturation_ratio", help: "Fraction of time a raft goroutine was busy (0 to 1), by thread.",
		fixed: map[string]string{"thread": "fsm"}},
	"raft.replication.appendEntries.logs": {name: "raft_replication_entries_total", help: "Entries the leader sent to a peer, by peer."},

	// Durations, milliseconds in go-metrics.
	"raft.fsm.apply":                     {name: "raft_fsm_apply_seconds", help: "Time the state machine took to apply one committed entry."},
	"raft.fsm.store_config":              {name: "raft_fsm_store_config_seconds", help: "Time the state machine took to store a configuration entry."},
	"raft.fsm.applyBatch":                {name: "raft_fsm_apply_batch_seconds", help: "Time the state machine took to apply one batch of entries."},
	"raft.fsm.snapshot":                  {name: "raft_fsm_snapshot_seconds", help: "Time the state machine took to start a snapshot."},
	"raft.fsm.restore":                   {name: "raft_fsm_restore_seconds", help: "Time the state machine took to restore from a snapshot."},
	"raft.fsm.lastRestoreDuration":       {name: "raft_fsm_last_restore_duration_seconds", help: "Duration of the last snapshot restore."},
	"raft.fsm.enqueue":                   {name: "raft_fsm_enqueue_seconds", help: "Time to hand committed entries to the state machine goroutine."},
	"raft.net.getRPCType":                {name: "raft_net_get_rpc_type_seconds", help: "Time to read an incoming RPC's type byte."},
	"raft.net.rpcDecode":                 {name: "raft_net_rpc_decode_seconds", help: "Time to decode an incoming RPC, by RPC type."},
	"raft.net.rpcEnqueue":                {name: "raft_net_rpc_enqueue_seconds", help: "Time to hand an incoming RPC to raft, by RPC type."},
	"raft.net.rpcRespond":                {name: "raft_net_rpc_respond_seconds", help: "Time raft took to answer an incoming RPC, by RPC type."},
	"raft.commitTime":                    {name: "raft_commit_time_seconds", help: "Time from the leader's dispatch of an entry to its commit."},
	"raft.leader.lastContact":            {name: "raft_leader_last_contact_seconds", help: "Time since the leader last heard from a quorum, sampled on each check."},
	"raft.leader.oldestLogAge":           {name: "raft_leader_oldest_log_age_seconds", help: "Age of the oldest entry in the leader's log."},
	"raft.restoreUserSnapshot":           {name: "raft_restore_user_snapshot_seconds", help: "Time to restore a user-supplied snapshot."},
	"raft.leader.dispatchLog":            {name: "raft_leader_dispatch_log_seconds", help: "Time the leader took to write a batch of entries to its own log."},
	"raft.rpc.processHeartbeat":          {name: "raft_rpc_process_heartbeat_seconds", help: "Time a follower took to process a heartbeat."},
	"raft.rpc.appendEntries":             {name: "raft_rpc_append_entries_seconds", help: "Time a follower took to process an append request."},
	"raft.rpc.appendEntries.storeLogs":   {name: "raft_rpc_append_entries_store_logs_seconds", help: "Time a follower took to store an append's entries."},
	"raft.rpc.appendEntries.processLogs": {name: "raft_rpc_append_entries_process_logs_seconds", help: "Time a follower took to hand an append's committed entries to the state machine."},
	"raft.rpc.requestVote":               {name: "raft_rpc_request_vote_seconds", help: "Time to process a vote request."},
	"raft.rpc.installSnapshot":           {name: "raft_rpc_install_snapshot_seconds", help: "Time a follower took to install a snapshot sent by the leader."},
	"raft.candidate.electSelf":           {name: "raft_candidate_elect_self_seconds", help: "Time a candidate took to request votes from its peers."},
	"raft.candidate.preElectSelf":        {name: "raft_candidate_pre_elect_self_seconds", help: "Time a pre-candidate took to request pre-votes from its peers."},
	"raft.replication.installSnapshot":   {name: "raft_replication_install_snapshot_seconds", help: "Time the leader took to send a snapshot to a peer, by peer."},
	"raft.replication.heartbeat":         {name: "raft_replication_heartbeat_seconds", help: "Time of a heartbeat round trip to a peer, by peer."},
	"raft.replication.appendEntries.rpc": {name: "raft_replication_append_entries_seconds", help: "Time of an append round trip to a peer, by peer."},
	"raft.snapshot.takeSnapshot":         {name: "raft_snapshot_take_seconds", help: "Time to take a snapshot, state machine and persisting included."},
	"raft.snapshot.create":               {name: "raft_snapshot_create_seconds", help: "Time to create a snapshot sink."},
	"raft.snapshot.persist":              {name: "raft_snapshot_persist_seconds", help: "Time to persist a snapshot to its store."},
	"raft.compactLogs":                   {name: "raft_compact_logs_seconds", help: "Time to compact the log after a snapshot."},
	"raft.removeOldLogs":                 {name: "raft_remove_old_logs_seconds", help: "Time to delete compacted entries from the log store."},
}

// raftPeerKeys are hashicorp/raft's legacy keys that append the peer ID to
// a labelled key's name (raft.replication.heartbeat.<peer>): dropped.
var raftPeerKeys = []string{
	"raft.replication.installSnapshot", "raft.replication.heartbeat",
	"raft.replication.appendEntries.rpc", "raft.replication.appendEntries.logs",
}

// gmLabelNames renames hashicorp/raft's label names.
var gmLabelNames = map[string]string{"peer_id": "peer", "rpcType": "rpc_type"}

// gmTables joins hashicorp/raft's families with the ones jobraft's raft
// and wal packages describe (MetricHelp); those are already in base units,
// named from their key.
func gmTables() map[string]gmFamily {
	out := make(map[string]gmFamily, len(raftFamilies)+16)
	for k, f := range raftFamilies {
		if strings.HasSuffix(f.name, "_seconds") {
			f.scale = 1e-3
		}
		out[k] = f
	}
	for _, help := range []map[string]string{raft.MetricHelp(), wal.MetricHelp()} {
		for k, h := range help {
			out[k] = gmFamily{name: promName(k), help: h}
		}
	}
	return out
}

// promName turns a dotted camel-case go-metrics key into a snake-case
// Prometheus name: raft.fsm.applyBatch -> raft_fsm_apply_batch.
func promName(key string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range key {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			prevLower = true
		default:
			b.WriteByte('_')
			prevLower = false
		}
	}
	return b.String()
}
