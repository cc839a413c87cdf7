package raft

import (
	"maps"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// Metrics are emitted through go-metrics, the library hashicorp/raft and the
// wal use, so one sink sees all three. Keys are dotted go-metrics keys; a
// counter counts events (a Prometheus exporter adds _total), a gauge holds
// a value in base units. MetricHelp describes each one: an exporter uses it
// as the HELP text.
//
// The member label keeps members sharing a process (tests, embedded
// clusters) from overwriting each other's value.
var metricHelp = map[string]string{
	"jobraft.raft.diverged": "1 while the member has diverged from its leader's log (re-seed it), else 0; " +
		"emitted at start, on detection and every 10 s.",
	"jobraft.raft.log_failed": "1 while the member's log has failed closed after a write or fsync error or a " +
		"full disk (restart it on a healthy disk), else 0; emitted at start and on failure.",
	"jobraft.raft.commit_clamped": "Appends whose leader commit index was clamped to the last entry the seam " +
		"verified (not an error; many mean the leader sends commit indexes ahead of what it sent).",
	"jobraft.raft.timeout_now_refused": "TimeoutNow requests refused because they came from a member that is " +
		"not the current leader, or to a non-voter.",
	"jobraft.raft.install_answered": "Install-snapshot requests answered without restoring because the member " +
		"already holds the snapshot's last entry.",
	"jobraft.raft.install_deferred": "Install-snapshot requests refused until raft adopts the sender's term.",
	"jobraft.raft.install_behind": "Install-snapshot requests at or below the commit floor refused; the member " +
		"asked the sender for a newer snapshot.",
	"jobraft.raft.install_diverged": "Install-snapshot requests refused because they conflict with entries the " +
		"member committed (it has diverged).",
	"jobraft.raft.append_refused_at_seam": "Append requests refused by the persist guard before raft saw them.",
	"jobraft.raft.stale_append_refused":   "Append requests refused because they matched raft's stale last index rather than the log's.",
	"jobraft.raft.stale_vote_refused":     "Vote requests refused because raft's last index was stale and the candidate's log is behind the member's.",
	"jobraft.raft.stale_campaign_refused": "Elections this member did not start because it has diverged or raft's last index is stale.",
	"jobraft.raft.stickiness_lifted": "Vote and pre-vote requests let past raft's leader stickiness because the " +
		"member had not heard from its leader for its heartbeat timeout (the Raft thesis's rule).",

	// The leader's catch-up monitor (catchup.go), per member (label member).
	"jobraft.catchup.lag_entries": "Entries the member's log is behind the leader's last index, as its last " +
		"progress report showed (on the leader).",
	"jobraft.catchup.stalled": "1 while the leader's catch-up policy names the member stalled (not converging: " +
		"see Status.Progress for the reason), else 0.",
	"jobraft.catchup.member_diverged": "1 while the leader's catch-up policy names the member diverged (its log " +
		"contradicts the leader's at or below its commit floor: re-seed it), else 0.",
	"jobraft.catchup.entries_per_second": "Entries per second the member's log advances, as the leader measures it.",
	"jobraft.catchup.bytes_per_second":   "Bytes per second the leader sends the member (appends and snapshot chunks).",
	"jobraft.catchup.eta_seconds": "Seconds until the member holds the leader's log at the current rates " +
		"(0: nothing remains; -1: unknown).",
	"jobraft.catchup.stalled_total":  "Members the leader's catch-up policy named stalled, by reason (label reason).",
	"jobraft.catchup.promoted_total": "Non-voters the leader's catch-up policy promoted to voters.",
}

// MetricHelp returns a description of every go-metrics key this package
// emits, keyed by the dotted key (e.g. "jobraft.raft.diverged"). A new
// metric gets its entry here.
func MetricHelp() map[string]string { return maps.Clone(metricHelp) }

func gaugeDiverged(member string, diverged bool) {
	var v float32
	if diverged {
		v = 1
	}
	metrics.SetGaugeWithLabels([]string{"jobraft", "raft", "diverged"}, v, []metrics.Label{{Name: "member", Value: member}})
}

func gaugeLogFailed(member string, failed bool) {
	var v float32
	if failed {
		v = 1
	}
	metrics.SetGaugeWithLabels([]string{"jobraft", "raft", "log_failed"}, v, []metrics.Label{{Name: "member", Value: member}})
}
