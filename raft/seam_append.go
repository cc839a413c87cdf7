package raft

import (
	"slices"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
)

// A conflict truncation and the append after it, as one step (U4).
//
// hashicorp/raft v1.7.3's follower handles an AppendEntries whose entries
// conflict with its log in two store calls: DeleteRange(conflict, last),
// then StoreLogs(the new entries). Its cached last index moves only after
// the store succeeds (raft.go:1537-1544, "TODO: leaving r.getLastLog() in
// the wrong state"). When the guard refuses the batch — an unstamped
// command under RequireStamp, a payload that does not match its stamp (G5),
// a record too large for the format — the suffix is gone but raft still
// believes in it: every later append that reaches the cut index fails its
// duplicate check (GetLog of an entry the log no longer holds), the leader
// walks back one index at a time, never past the cut, and never sends a
// snapshot. The member never converges. The Raft paper's Figure 2 makes
// rules 3 and 4 one step.
//
// So the seam works out, before raft sees an append, whether raft would
// truncate, and if so asks the log whether it would accept the truncation
// and then the batch (wal.Log.CheckReplace, the guard's own rules on the
// shape the log will have after the cut). If it would not, the seam answers
// the append itself, refused as raft would have answered it, and raft
// never truncates: the log and raft's cache stay as they were, and the
// leader's next append (its own, stamped entries) goes through. An append
// whose batch would be refused without a truncation is left to raft, which
// then changes nothing either.

// checkAppend answers an AppendEntries whose conflict truncation would be
// followed by a refused append (U4), or that carries a nil entry, and
// reports whether it did. It is written to be chained with other checks of
// appends at the seam.
//
// It mirrors raft's own walk over the request on the log as it is now
// (raft.go:1476-1535): only an append raft would process (its term is not
// below ours), whose previous entry matches, with an entry at or below the
// log's last index whose term differs from the stored one. Whatever it
// cannot read (an entry compacted or missing, a damaged record) it leaves
// to raft, which fails the same lookup and returns before truncating.
//
// It reads the log directly and raft only through its atomic accessors, on
// the transport's goroutine. The seam hands raft one RPC at a time and
// waits for its answer, so the log it reads is the one raft left after the
// previous RPC.
func (n *Node) checkAppend(rpc hraft.RPC, a *hraft.AppendEntriesRequest) bool {
	if len(a.Entries) == 0 {
		return false
	}
	r := n.raftNow()
	if r == nil {
		return false
	}
	// A nil entry is not U4, but the same walk: hashicorp/raft dereferences
	// every entry of an append it processes and a nil one (a msgpack nil in
	// the list) panics its main loop. No sender has a reason to send one.
	v := seam.AppendView{NilEntry: slices.Contains(a.Entries, nil), ReqTerm: a.Term, CurTerm: r.CurrentTerm()}
	var at uint64
	var entries []*hraft.Log
	var err error
	if !v.NilEntry && v.ReqTerm >= v.CurTerm {
		var i int
		if i, v.Conflict = conflictAt(n.log, a); v.Conflict {
			at, entries = a.Entries[i].Index, a.Entries[i:]
			err = n.log.CheckReplace(at, entries)
			v.ReplaceRefused = err != nil
		} else if !n.div.is() {
			// No truncation to refuse: an append whose previous entry this
			// member compacted may still show a divergence (divergentEntry).
			if d, ok := divergentEntry(n.log, n.log.Floor(), a); ok {
				n.diverge(d, nil)
			}
		}
	}
	switch seam.Append(v) {
	case seam.AppendRefuseNil:
		n.refuseAppend(rpc, a, v.CurTerm, "an entry is nil", nil)
		return true
	case seam.AppendRefuseReplace:
		n.refuseAppend(rpc, a, v.CurTerm, "the batch after its conflict truncation would be refused, so neither happens", err,
			"truncate-from", at, "entries", len(entries))
		return true
	}
	return false
}

// refuseAppend answers an append as raft answers one that fails: with our
// term (raft adopts a higher one only when it handles the append; the
// leader's heartbeats carry it), our last index, backoff allowed. The
// refusal is counted and logged; err is the guard's diagnostic (lengths
// and CRCs, never payload bytes), already reported as a guard refusal.
func (n *Node) refuseAppend(rpc hraft.RPC, a *hraft.AppendEntriesRequest, term uint64, why string, err error, attrs ...any) {
	last, _ := n.log.LastIndex() // 0 while closing: raft's answer would not matter either
	n.seam.appendsRefused.Add(1)
	metrics.IncrCounter([]string{"jobraft", "raft", "append_refused_at_seam"}, 1)
	attrs = append([]any{"from", string(a.ID), "term", a.Term, "last-index", last}, attrs...)
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	n.cfg.Logger.Named("seam").Warn("append refused: "+why, attrs...)
	rpc.Respond(&hraft.AppendEntriesResponse{
		RPCHeader: hraft.RPCHeader{
			ProtocolVersion: hraft.ProtocolVersionMax,
			ID:              []byte(n.cfg.ID),
			Addr:            []byte(n.nt.LocalAddr()),
		},
		Term:    term,
		LastLog: last,
	}, nil)
}

// conflictAt returns the position in a.Entries of the first entry raft
// would find in conflict with log — at or below the log's last index, with
// a different term — after a.PrevLogEntry matched. ok is false when raft
// would not truncate: the previous entry does not match (raft refuses the
// append as it is), every entry is already stored or new, or a lookup
// fails (raft's fails too and it returns before truncating).
func conflictAt(log hraft.LogStore, a *hraft.AppendEntriesRequest) (i int, ok bool) {
	last, err := log.LastIndex()
	if err != nil || last == 0 || a.Entries[0] == nil || a.Entries[0].Index > last {
		return 0, false
	}
	if a.PrevLogEntry > 0 {
		var prev hraft.Log
		if err := log.GetLog(a.PrevLogEntry, &prev); err != nil || prev.Term != a.PrevLogTerm {
			return 0, false
		}
	}
	for i, e := range a.Entries {
		if e == nil || e.Index > last {
			return 0, false
		}
		var stored hraft.Log
		if err := log.GetLog(e.Index, &stored); err != nil {
			return 0, false
		}
		if stored.Term != e.Term {
			return i, true
		}
	}
	return 0, false
}
