package raft

import (
	"testing"
	"time"
)

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
		if got := liftWait(time.Second, c.silent); got != c.want {
			t.Errorf("liftWait(1s, %v) = %v, want %v", c.silent, got, c.want)
		}
	}
	h := time.Second
	silent := stickyView{Follower: true, Leader: "l", Candidate: "c", Silent: h, Timeout: h}
	for _, tc := range []struct {
		name string
		v    stickyView
		want bool
	}{
		{"silent for the timeout", silent, true},
		{"heard from within it", with(silent, func(v *stickyView) { v.Silent = h - time.Millisecond }), false},
		{"no leader known: raft decides without stickiness", with(silent, func(v *stickyView) { v.Leader = "" }), false},
		{"the candidate is the leader", with(silent, func(v *stickyView) { v.Candidate = "l" }), false},
		{"not a follower", with(silent, func(v *stickyView) { v.Follower = false }), false},
	} {
		if got := leaderSilent(tc.v); got != tc.want {
			t.Errorf("%s: leaderSilent(%+v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

func with[T any](v T, f func(*T)) T {
	f(&v)
	return v
}

func TestDecidePreVote(t *testing.T) {
	ok := preVoteView{InConfig: true, Voter: true, Term: 5, ReqTerm: 6, LastIndex: 100, LastTerm: 5, CandIndex: 100, CandTerm: 5}
	for _, tc := range []struct {
		name string
		v    preVoteView
		want bool
	}{
		{"as up to date, a later term", ok, true},
		{"the same term", with(ok, func(v *preVoteView) { v.ReqTerm = 5 }), true},
		{"a longer log", with(ok, func(v *preVoteView) { v.CandIndex = 120 }), true},
		{"a later last term, shorter", with(ok, func(v *preVoteView) { v.CandIndex, v.CandTerm = 90, 6 }), true},
		{"an older request term", with(ok, func(v *preVoteView) { v.ReqTerm = 4 }), false},
		{"a shorter log", with(ok, func(v *preVoteView) { v.CandIndex = 99 }), false},
		{"an older last term", with(ok, func(v *preVoteView) { v.CandIndex, v.CandTerm = 200, 4 }), false},
		{"not in the configuration", with(ok, func(v *preVoteView) { v.InConfig, v.Voter = false, false }), false},
		{"a non-voter", with(ok, func(v *preVoteView) { v.Voter = false }), false},
	} {
		if got := decidePreVote(tc.v); got != tc.want {
			t.Errorf("%s: decidePreVote(%+v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}
