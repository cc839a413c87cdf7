package seam

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestDecide is the seam's decisions (decide.go) as one table: each row
// names the rule it checks, docs/upstream.md's U-number first. Install,
// the floor check and the stickiness rule have tables of their own below.
func TestDecide(t *testing.T) {
	voter := TimeoutNowView{Started: true, Role: "Follower", Follower: true, Leader: "l", LeaderAddr: "a", From: "l", FromAddr: "a", Voter: true}
	hb := HeartbeatView{Joined: true, Started: true, Term: 5, CurTerm: 5, Follower: true}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"U1 no entries, commit past prev: clamped to prev", pair(Clamp(4, 0, 5)), pair(4, true)},
		{"U1 entries, commit past the last: clamped to the last", pair(Clamp(4, 2, 9)), pair(6, true)},
		{"U1 commit at the last entry: kept", pair(Clamp(4, 2, 6)), pair(6, false)},
		{"U1 commit below prev: kept", pair(Clamp(4, 2, 3)), pair(3, false)},
		{"U1 nothing", pair(Clamp(0, 0, 0)), pair(0, false)},
		{"U11 commit past the durable index: bounded", Bound(9, 7), uint64(7)},
		{"U11 commit within it: kept", Bound(5, 7), uint64(5)},
		{"U3 append at the stale index: refused", StaleAppend(9, 9), true},
		{"U3 append elsewhere: raft's", StaleAppend(9, 8), false},
		{"U3 not stale: raft's", StaleAppend(0, 0), false},
		{"U3 vote for a candidate behind the real log: refused", StaleVote(StaleVoteView{Stale: 9, RealIndex: 6, RealTerm: 3, CandIndex: 5, CandTerm: 3}), true},
		{"U3 vote for a candidate with an older last term: refused", StaleVote(StaleVoteView{Stale: 9, RealIndex: 6, RealTerm: 3, CandIndex: 50, CandTerm: 2}), true},
		{"U3 vote for a candidate as up to date: raft's", StaleVote(StaleVoteView{Stale: 9, RealIndex: 6, RealTerm: 3, CandIndex: 6, CandTerm: 3}), false},
		{"U3 not stale: raft's", StaleVote(StaleVoteView{RealIndex: 6, RealTerm: 3, CandIndex: 1, CandTerm: 1}), false},
		{"U4 a nil entry: refused", Append(AppendView{NilEntry: true, ReqTerm: 1, CurTerm: 5}), AppendRefuseNil},
		{"U4 a conflict whose store is refused: refused whole", Append(AppendView{ReqTerm: 5, CurTerm: 5, Conflict: true, ReplaceRefused: true}), AppendRefuseReplace},
		{"U4 a conflict whose store is accepted: raft's", Append(AppendView{ReqTerm: 5, CurTerm: 5, Conflict: true}), AppendPass},
		{"U4 no conflict: raft's", Append(AppendView{ReqTerm: 6, CurTerm: 5}), AppendPass},
		{"U4 an older term: raft refuses it", Append(AppendView{ReqTerm: 4, CurTerm: 5, Conflict: true, ReplaceRefused: true}), AppendPass},
		{"U5 from the leader to a voting follower: obeyed", TimeoutNow(voter), ""},
		{"U5 not started", TimeoutNow(TimeoutNowView{}), "not started"},
		{"U5 to a leader", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.Follower, v.Role = false, "Leader" })), "not a follower (Leader)"},
		{"U5 no leader known", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.Leader = "" })), "not from the current leader"},
		{"U5 from another member", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.From = "x" })), "not from the current leader"},
		{"U5 from the leader's ID at another address", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.FromAddr = "b" })), "not from the current leader"},
		{"U5 no address given: the ID decides", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.FromAddr = "" })), ""},
		{"U5 to a non-voter", TimeoutNow(with(voter, func(v *TimeoutNowView) { v.Voter = false })), "not a voter"},
		{"U6 current term on a follower: fast path", Heartbeat(hb), RouteFast},
		{"U6 a higher term: main loop", Heartbeat(with(hb, func(v *HeartbeatView) { v.Term = 6 })), RouteMainLoop},
		{"U6 a lower term: main loop", Heartbeat(with(hb, func(v *HeartbeatView) { v.Term = 4 })), RouteMainLoop},
		{"U6 not a follower: main loop", Heartbeat(with(hb, func(v *HeartbeatView) { v.Follower = false })), RouteMainLoop},
		{"U6 not started: main loop", Heartbeat(with(hb, func(v *HeartbeatView) { v.Started = false })), RouteMainLoop},
		{"U6 joining: the join check first", Heartbeat(with(hb, func(v *HeartbeatView) { v.Joined = false })), RouteJoin},
		{"U10 a failed log: no campaign", Campaign(CampaignView{LogFailed: true}), CampaignLogFailed},
		{"U3 a stale last index: no campaign", Campaign(CampaignView{Stale: 9}), CampaignStale},
		{"diverged: no campaign", Campaign(CampaignView{Diverged: true, LogFailed: true, Stale: 9}), CampaignDiverged},
		{"healthy: campaigns", Campaign(CampaignView{}), CampaignOK},
		{"U2 verified at the floor: raft installs", AfterCheck(PastVerified), InstallPass},
		{"U2 unverified: raft installs", AfterCheck(PastUnverified), InstallPass},
		{"U2 another term at the floor: diverged", AfterCheck(PastDiverged), InstallDiverged},
		{"U2 the sender not asked: refused", AfterCheck(PastRetry), InstallUnasked},
		{"U2 the term moved during the lookups: deferred", Recheck(InstallAnswer, 5, 6), InstallDefer},
		{"U2 the term moved, diverged: stands", Recheck(InstallDiverged, 5, 6), InstallDiverged},
		{"U2 the term stayed: kept", Recheck(InstallAnswer, 5, 5), InstallAnswer},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

type twoOf struct {
	a uint64
	b bool
}

func pair(a uint64, b bool) twoOf { return twoOf{a, b} }

func with[T any](v T, f func(*T)) T {
	f(&v)
	return v
}

// TestSeamDecideInstall is the seam's rule for InstallSnapshot (Install,
// docs/upstream.md U2) as a table: the member is at commit floor 13 in
// term 5 unless a row says otherwise.
func TestSeamDecideInstall(t *testing.T) {
	base := InstallView{ReqTerm: 5, CurTerm: 5, Floor: 13}
	for _, tc := range []struct {
		name string
		edit func(v *InstallView)
		want InstallAction
	}{
		{"past the floor, not held: raft installs", func(v *InstallView) { v.Index, v.Term = 20, 5 }, InstallPass},
		{"past the floor over a divergent uncommitted entry: raft installs", func(v *InstallView) { v.Index, v.Term, v.HeldTerm = 20, 5, 4 }, InstallPass},
		{"past the floor, the log holds it: Figure 13 step 6", func(v *InstallView) { v.Index, v.Term, v.HeldTerm, v.InLog = 20, 5, 5, true }, InstallAnswer},
		{"past the floor, held, higher term", func(v *InstallView) {
			v.Index, v.Term, v.HeldTerm, v.InLog, v.ReqTerm = 20, 5, 5, true, 6
		}, InstallDefer},
		{"below the floor, in the log", func(v *InstallView) { v.Index, v.Term, v.HeldTerm, v.InLog = 8, 3, 3, true }, InstallAnswer},
		{"at the floor, raft's last entry (its snapshot)", func(v *InstallView) { v.Index, v.Term, v.HeldTerm, v.IsLast = 13, 4, 4, true }, InstallAnswer},
		{"below the floor, higher term: not adopted here", func(v *InstallView) { v.Index, v.Term, v.HeldTerm, v.InLog, v.ReqTerm = 8, 3, 3, true, 7 }, InstallDefer},
		{"below the floor, lower term: raft refuses it", func(v *InstallView) { v.Index, v.Term, v.InLog, v.ReqTerm = 8, 3, true, 4 }, InstallPass},
		{"below the floor, another term in the log", func(v *InstallView) { v.Index, v.Term, v.HeldTerm = 8, 4, 3 }, InstallDiverged},
		{"below the floor, another term in the snapshot", func(v *InstallView) { v.Index, v.Term, v.HeldTerm = 13, 5, 4 }, InstallDiverged},
		{"below the floor, another term, lower request term", func(v *InstallView) { v.Index, v.Term, v.HeldTerm, v.ReqTerm = 8, 4, 3, 2 }, InstallDiverged},
		{"below the floor, compacted (term unknown): behind", func(v *InstallView) { v.Index, v.Term = 8, 3 }, InstallBehind},
		{"below the floor, compacted, higher term", func(v *InstallView) { v.Index, v.Term, v.ReqTerm = 8, 3, 6 }, InstallDefer},
		{"held at raft's last entry but raft's last is stale: behind", func(v *InstallView) { v.Index, v.Term, v.HeldTerm = 13, 4, 0 }, InstallBehind},
	} {
		v := base
		tc.edit(&v)
		if got := Install(v); got != tc.want {
			t.Errorf("%s: %+v: got %v, want %v", tc.name, v, got, tc.want)
		}
	}
}

func TestDecidePastFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		v    PastView
		want PastVerdict
	}{
		{"floor 0: nothing committed", PastView{}, PastVerified},
		{"floor 0, sender unreachable", PastView{Floor: 0, Asked: false}, PastVerified},
		{"same term", PastView{Floor: 9, Asked: true, Own: 3, Sender: 3, OwnKnown: true, SenderKnown: true}, PastVerified},
		{"another term", PastView{Floor: 9, Asked: true, Own: 2, Sender: 3, OwnKnown: true, SenderKnown: true}, PastDiverged},
		{"another term, lower", PastView{Floor: 9, Asked: true, Own: 4, Sender: 3, OwnKnown: true, SenderKnown: true}, PastDiverged},
		{"own term unknown", PastView{Floor: 9, Asked: true, Sender: 3, SenderKnown: true}, PastUnverified},
		{"sender's term unknown", PastView{Floor: 9, Asked: true, Own: 3, OwnKnown: true}, PastUnverified},
		{"sender without jr.terms", PastView{Floor: 9, Old: true, Own: 3, OwnKnown: true}, PastUnverified},
		{"sender unreachable", PastView{Floor: 9, Own: 3, OwnKnown: true}, PastRetry},
	} {
		if got := PastFloor(c.v); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLeaderSilent(t *testing.T) {
	// A request that found the leader silent for 0.8 H or more waits until
	// the silence would reach H, and at least H/5 (two heartbeat
	// intervals, for heartbeats queued while the member stood still).
	for _, c := range []struct{ silent, want time.Duration }{
		{800 * time.Millisecond, 200 * time.Millisecond},
		{900 * time.Millisecond, 200 * time.Millisecond},
		{5 * time.Second, 200 * time.Millisecond},
		{790 * time.Millisecond, 210 * time.Millisecond},
	} {
		if got := LiftWait(time.Second, c.silent); got != c.want {
			t.Errorf("LiftWait(1s, %v) = %v, want %v", c.silent, got, c.want)
		}
	}
	h := time.Second
	silent := StickyView{Follower: true, Leader: "l", Candidate: "c", Silent: h, Timeout: h}
	for _, tc := range []struct {
		name string
		v    StickyView
		want bool
	}{
		{"silent for the timeout", silent, true},
		{"heard from within it", with(silent, func(v *StickyView) { v.Silent = h - time.Millisecond }), false},
		{"no leader known: raft decides without stickiness", with(silent, func(v *StickyView) { v.Leader = "" }), false},
		{"the candidate is the leader", with(silent, func(v *StickyView) { v.Candidate = "l" }), false},
		{"not a follower", with(silent, func(v *StickyView) { v.Follower = false }), false},
	} {
		if got := LeaderSilent(tc.v); got != tc.want {
			t.Errorf("%s: LeaderSilent(%+v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

func TestDecidePreVote(t *testing.T) {
	ok := PreVoteView{InConfig: true, Voter: true, Term: 5, ReqTerm: 6, LastIndex: 100, LastTerm: 5, CandIndex: 100, CandTerm: 5}
	for _, tc := range []struct {
		name string
		v    PreVoteView
		want bool
	}{
		{"as up to date, a later term", ok, true},
		{"the same term", with(ok, func(v *PreVoteView) { v.ReqTerm = 5 }), true},
		{"a longer log", with(ok, func(v *PreVoteView) { v.CandIndex = 120 }), true},
		{"a later last term, shorter", with(ok, func(v *PreVoteView) { v.CandIndex, v.CandTerm = 90, 6 }), true},
		{"an older request term", with(ok, func(v *PreVoteView) { v.ReqTerm = 4 }), false},
		{"a shorter log", with(ok, func(v *PreVoteView) { v.CandIndex = 99 }), false},
		{"an older last term", with(ok, func(v *PreVoteView) { v.CandIndex, v.CandTerm = 200, 4 }), false},
		{"not in the configuration", with(ok, func(v *PreVoteView) { v.InConfig, v.Voter = false, false }), false},
		{"a non-voter", with(ok, func(v *PreVoteView) { v.Voter = false }), false},
	} {
		if got := PreVote(tc.v); got != tc.want {
			t.Errorf("%s: PreVote(%+v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

// TestDecideRapid checks each decision's safety property over random
// views (rapid prints the seed that replays a failure): what the seam may
// never answer, and where it must leave raft alone.
func TestDecideRapid(t *testing.T) {
	small := rapid.Uint64Range(0, 12)
	rapid.Check(t, func(t *rapid.T) {
		// U1: never past the verified entry nor the leader's commit; only
		// lowered when past the verified entry.
		prev, n, lc := small.Draw(t, "prev"), rapid.IntRange(0, 5).Draw(t, "entries"), small.Draw(t, "leaderCommit")
		if c, clamped := Clamp(prev, n, lc); c > lc || c > prev+uint64(n) || clamped != (lc > prev+uint64(n)) || (!clamped && c != lc) {
			t.Fatalf("Clamp(%d, %d, %d) = %d, %v", prev, n, lc, c, clamped)
		}
		// U11.
		if c, d := small.Draw(t, "commit"), small.Draw(t, "durable"); Bound(c, d) > c || Bound(c, d) > d || (Bound(c, d) != c && Bound(c, d) != d) {
			t.Fatalf("Bound(%d, %d) = %d", c, d, Bound(c, d))
		}
		// U2: a committed contradiction is never answered Success nor handed
		// to raft in the member's term or a later one; an install at or
		// below the floor reaches raft only in an older term; Success only
		// in the sender's term, for an entry raft's next append will find.
		iv := InstallView{ReqTerm: small.Draw(t, "reqTerm"), Index: small.Draw(t, "index"), Term: small.Draw(t, "term"),
			CurTerm: small.Draw(t, "curTerm"), Floor: small.Draw(t, "floor"), HeldTerm: small.Draw(t, "held"),
			InLog: rapid.Bool().Draw(t, "inLog"), IsLast: rapid.Bool().Draw(t, "isLast")}
		act := Install(iv)
		contradiction := iv.Index <= iv.Floor && iv.HeldTerm != 0 && iv.HeldTerm != iv.Term
		switch {
		case contradiction && act != InstallDiverged:
			t.Fatalf("Install(%+v) = %v on a committed contradiction", iv, act)
		case act == InstallPass && iv.Index <= iv.Floor && iv.ReqTerm >= iv.CurTerm:
			t.Fatalf("Install(%+v) hands raft an install at or below the floor", iv)
		case act == InstallAnswer && (iv.ReqTerm != iv.CurTerm || !(iv.InLog || iv.IsLast)):
			t.Fatalf("Install(%+v) answers Success for an entry raft cannot continue from", iv)
		}
		if now := small.Draw(t, "termNow"); now != iv.CurTerm {
			if r := Recheck(act, iv.CurTerm, now); r != InstallDefer && r != InstallDiverged {
				t.Fatalf("Recheck(%v, %d, %d) = %v", act, iv.CurTerm, now, r)
			}
		} else if Recheck(act, now, now) != act {
			t.Fatalf("Recheck changed %v without a term change", act)
		}
		pv := PastView{Floor: small.Draw(t, "pfloor"), Own: small.Draw(t, "own"), Sender: small.Draw(t, "sender"),
			OwnKnown: rapid.Bool().Draw(t, "ownKnown"), SenderKnown: rapid.Bool().Draw(t, "senderKnown"),
			Asked: rapid.Bool().Draw(t, "asked"), Old: rapid.Bool().Draw(t, "old")}
		if p := PastFloor(pv); p == PastVerified && pv.Floor > 0 && !(pv.Asked && !pv.Old && pv.OwnKnown && pv.SenderKnown && pv.Own == pv.Sender) {
			t.Fatalf("PastFloor(%+v) verified without both terms known and equal", pv)
		} else if p == PastDiverged && (pv.Own == pv.Sender || !pv.OwnKnown || !pv.SenderKnown) {
			t.Fatalf("PastFloor(%+v) diverged without two known, different terms", pv)
		}
		// U3, U13: raft's election restriction, against the paper's text.
		ci, ct, li, lt := small.Draw(t, "candIndex"), small.Draw(t, "candTerm"), small.Draw(t, "lastIndex"), small.Draw(t, "lastTerm")
		paper := ct > lt || (ct == lt && ci >= li)
		stale := small.Draw(t, "stale")
		if StaleVote(StaleVoteView{Stale: stale, RealIndex: li, RealTerm: lt, CandIndex: ci, CandTerm: ct}) != (stale != 0 && !paper) {
			t.Fatalf("StaleVote stale %d cand (%d, %d) real (%d, %d)", stale, ci, ct, li, lt)
		}
		if StaleAppend(stale, prev) != (stale != 0 && prev == stale) {
			t.Fatalf("StaleAppend(%d, %d)", stale, prev)
		}
		vv := PreVoteView{InConfig: rapid.Bool().Draw(t, "inConfig"), Voter: rapid.Bool().Draw(t, "voter"),
			Term: small.Draw(t, "pvTerm"), ReqTerm: small.Draw(t, "pvReqTerm"), LastIndex: li, LastTerm: lt, CandIndex: ci, CandTerm: ct}
		if PreVote(vv) != (vv.InConfig && vv.Voter && vv.ReqTerm >= vv.Term && paper) {
			t.Fatalf("PreVote(%+v) is not raft's rule less the leader check", vv)
		}
		h := time.Duration(rapid.Int64Range(1, 1e10).Draw(t, "h"))
		silent := time.Duration(rapid.Int64Range(h.Nanoseconds()-h.Nanoseconds()/5, 2e10).Draw(t, "silent"))
		if w := LiftWait(h, silent); w < h/5 || silent+w < h {
			t.Fatalf("LiftWait(%v, %v) = %v", h, silent, w)
		}
		sv := StickyView{Follower: rapid.Bool().Draw(t, "follower"), Leader: rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "leader"),
			Candidate: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "candidate"), Silent: silent, Timeout: h}
		if LeaderSilent(sv) && (!sv.Follower || sv.Leader == "" || sv.Leader == sv.Candidate || sv.Silent < sv.Timeout) {
			t.Fatalf("LeaderSilent(%+v) lifts the stickiness of a leader heard from, or of none", sv)
		}
		// U4.
		av := AppendView{NilEntry: rapid.Bool().Draw(t, "nil"), ReqTerm: small.Draw(t, "aReqTerm"), CurTerm: small.Draw(t, "aCurTerm"),
			Conflict: rapid.Bool().Draw(t, "conflict"), ReplaceRefused: rapid.Bool().Draw(t, "refused")}
		want := AppendPass
		if av.NilEntry {
			want = AppendRefuseNil
		} else if av.ReqTerm >= av.CurTerm && av.Conflict && av.ReplaceRefused {
			want = AppendRefuseReplace
		}
		if got := Append(av); got != want {
			t.Fatalf("Append(%+v) = %v, want %v", av, got, want)
		}
		// U5, U6, U10.
		tv := TimeoutNowView{Started: rapid.Bool().Draw(t, "started"), Follower: rapid.Bool().Draw(t, "tFollower"),
			Leader: rapid.SampledFrom([]string{"", "l", "x"}).Draw(t, "tLeader"), From: rapid.SampledFrom([]string{"l", "x"}).Draw(t, "from"),
			LeaderAddr: "a", FromAddr: rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "fromAddr"), Voter: rapid.Bool().Draw(t, "tVoter")}
		if TimeoutNow(tv) == "" && !(tv.Started && tv.Follower && tv.Leader != "" && tv.From == tv.Leader && tv.FromAddr != "b" && tv.Voter) {
			t.Fatalf("TimeoutNow(%+v) obeyed", tv)
		}
		hv := HeartbeatView{Joined: rapid.Bool().Draw(t, "joined"), Started: rapid.Bool().Draw(t, "hStarted"),
			Term: small.Draw(t, "hTerm"), CurTerm: small.Draw(t, "hCurTerm"), Follower: rapid.Bool().Draw(t, "hFollower")}
		if Heartbeat(hv) == RouteFast && !(hv.Joined && hv.Started && hv.Term == hv.CurTerm && hv.Follower) {
			t.Fatalf("Heartbeat(%+v) takes the fast path", hv)
		}
		cv := CampaignView{Diverged: rapid.Bool().Draw(t, "diverged"), LogFailed: rapid.Bool().Draw(t, "failed"), Stale: stale}
		if (Campaign(cv) == CampaignOK) != (!cv.Diverged && !cv.LogFailed && cv.Stale == 0) {
			t.Fatalf("Campaign(%+v) = %v", cv, Campaign(cv))
		}
	})
}
