package main

// jobd's wire format is defined once, by the client package
// (examples/client/wire.go): jobd serves those types and decodes requests
// into them. This file converts the library's types into them, in one
// place. The golden replies in testdata/wire pin the bytes
// (TestWireFormatGoldens).

import (
	"encoding/hex"
	"unicode/utf8"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
)

// jobOf is a job on the wire.
func jobOf(j jobraft.Job) client.Job {
	out := client.Job{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority, MaxAttempts: j.MaxAttempts,
		IdempotencyKey: j.IdempotencyKey, Attempts: j.Attempts, State: j.State.String(), LastError: j.LastError,
		Result: j.Result, Created: j.Created, Updated: j.Updated,
		PayloadText: textOf(j.Payload), ResultText: textOf(j.Result),
	}
	if !j.RunAt.IsZero() {
		t := j.RunAt
		out.RunAt = &t
	}
	if !j.Finished.IsZero() {
		t := j.Finished
		out.Finished = &t
	}
	if j.Lease != nil {
		out.Lease = &client.Lease{Token: j.Lease.Token, Worker: j.Lease.Worker, Deadline: j.Lease.Deadline}
	}
	if len(j.After) > 0 {
		out.After, out.Unmet, out.OnParentFailure = j.After, j.Unmet, j.OnParentFailure.String()
	}
	out.Batch = j.Batch
	out.Unique = uniqueJSON(j.Unique)
	return out
}

// textOf is b as text when it is valid UTF-8, else "" (the reply then
// gives the bytes in base64 only).
func textOf(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	return string(b)
}

// claimedOf is a lease a claim returned.
func claimedOf(l *jobraft.Lease) client.Claimed {
	return client.Claimed{Job: jobOf(l.Job), Token: l.Token, Deadline: l.Deadline()}
}

// settledOf is the reply of ack, nak, extend and term: the job's state
// (state; "" if unknown) and, when the lease goes on (extend), its
// deadline.
func settledOf(l *jobraft.Lease, state string, leaseGoesOn bool) client.Settled {
	out := client.Settled{ID: l.Job.ID, State: state, Token: l.Token}
	if leaseGoesOn {
		out.Deadline = l.Deadline()
	}
	return out
}

// eventOf is a watch event on the wire.
func eventOf(ev jobraft.Event) client.Event {
	e := client.Event{Index: ev.Index, Time: ev.Time, Kind: string(ev.Kind), JobID: ev.JobID, Queue: ev.Queue,
		JobKind: ev.JobKind, Attempt: ev.Attempt, Token: ev.Token, Worker: ev.Worker, Removed: ev.Removed}
	if ev.State.Valid() {
		e.State = ev.State.String()
	}
	if ev.Err != nil {
		e.Error = ev.Err.Error()
	}
	return e
}

// statsOf is GET /v1/stats's reply (unserved: servedKinds.observe).
func statsOf(st jobraft.Stats, unserved []client.Unserved) client.Stats {
	queues := make([]client.QueueStats, len(st.Queues))
	for i, q := range st.Queues {
		counts := map[string]int{}
		for state := jobraft.StatePending; state.Valid(); state++ {
			counts[state.String()] = q.Counts.Of(state)
		}
		queues[i] = client.QueueStats{Counts: counts, Name: q.Name, Paused: q.Paused}
		for _, k := range q.Kinds {
			queues[i].Kinds = append(queues[i].Kinds, client.KindStats{Kind: k.Kind, Pending: k.Pending, Scheduled: k.Scheduled})
		}
	}
	return client.Stats{AppliedIndex: st.AppliedIndex, Jobs: st.Jobs, Leader: st.Leader, Member: st.Member, Queues: queues,
		Role: st.Role, BatchHolds: st.BatchHolds, BatchHoldsExpired: st.BatchHoldsExpired,
		SubmitEntries: st.SubmitEntries, SubmittedJobs: st.SubmittedJobs, Term: st.Term, WatchOldest: st.WatchOldest,
		Unserved: unserved, Limits: limitsOf(st.Limits)}
}

// statusOf is raft.Status with the digest in hex and the member's
// readiness.
func statusOf(st raft.Status, ready bool) client.Status {
	return client.Status{Status: st, Digest: hex.EncodeToString(st.Digest.Sum[:]), DigestIndex: st.Digest.Index, Ready: ready}
}

// memberInfoOf is member m in GET /v1/cluster/members, with the leader's
// catch-up progress of it (nil: none reported) and the add this member's
// API started for it (nil: none).
func memberInfoOf(m raft.Member, p *raft.MemberProgress, add *client.MemberAdd) client.MemberInfo {
	j := client.MemberInfo{ID: m.ID, Address: m.Address, Suffrage: suffrage(m.Voter), ETASeconds: -1, Add: add}
	if p != nil {
		j.Role, j.State, j.Reason, j.Detail = p.Role, p.State, p.Reason, p.Detail
		j.LastIndex, j.Lag, j.Round = p.LastIndex, p.Lag, p.Round
		j.EntriesPerSecond, j.BytesPerSecond, j.SnapshotBytesRemaining = p.EntriesPerSecond, p.BytesPerSecond, p.SnapshotBytesRemaining
		if p.ETA >= 0 {
			j.ETASeconds = p.ETA.Seconds()
		}
	}
	return j
}

// suffrage names a member's vote on the wire.
func suffrage(voter bool) string {
	if voter {
		return "voter"
	}
	return "nonvoter"
}
