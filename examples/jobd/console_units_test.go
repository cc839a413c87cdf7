package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
)

// A preview is text when the bytes are UTF-8 (a rune cut at the preview's
// end does not make them binary), hex otherwise, and says how much of how
// many bytes it shows.
func TestConsolePreview(t *testing.T) {
	if p := previewOf([]byte("héllo")); p.Text != "héllo" || p.Hex != "" || p.Note() != "6 bytes, shown as text (UTF-8)" {
		t.Errorf("text: %+v %q", p, p.Note())
	}
	if p := previewOf([]byte{0xff, 0x10}); p.Text != "" || p.Hex != "ff10\n" || p.Note() != "2 bytes, shown as hex (not UTF-8)" {
		t.Errorf("binary: %+v %q", p, p.Note())
	}
	big := []byte(strings.Repeat("a", previewMax-1) + "é" + "tail")
	if p := previewOf(big); p.Hex != "" || len(p.Text) != previewMax || !p.Truncated() ||
		p.Note() != "65541 bytes, the first 65536 shown as text (UTF-8)" {
		t.Errorf("a cut rune: hex %v, %d text bytes, %q", p.Hex != "", len(p.Text), p.Note())
	}
	if p := previewOf(nil); p.Size != 0 || p.Text != "" {
		t.Errorf("empty: %+v", p)
	}
}

// Claim wait runs from the last event that left the job pending (or its
// run-at, if later) to the claim; run time from the claim to the ack.
func TestConsoleLatencies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	seen := []feedEvent{
		{Kind: "submitted", State: "pending", Time: t0},
		{Kind: "claimed", State: "running", Time: t0.Add(time.Second)},
		{Kind: "naked", State: "pending", Time: t0.Add(2 * time.Second)},
	}
	claim := jobraft.Event{Kind: jobraft.EventClaimed, Time: t0.Add(5 * time.Second)}
	if w, ok := claimWait(claim, seen, time.Time{}); !ok || w != 3*time.Second {
		t.Errorf("wait after a nak: %v %v, want 3s", w, ok)
	}
	if w, ok := claimWait(claim, seen, t0.Add(4*time.Second)); !ok || w != time.Second {
		t.Errorf("wait with a later run-at: %v %v, want 1s", w, ok)
	}
	if _, ok := claimWait(claim, nil, time.Time{}); ok {
		t.Error("a wait without a known start")
	}
	ack := jobraft.Event{Kind: jobraft.EventAcked, Time: t0.Add(1500 * time.Millisecond)}
	if r, ok := runTime(ack, seen[:2]); !ok || r != 500*time.Millisecond {
		t.Errorf("run time: %v %v", r, ok)
	}
	f := newEventFeed()
	f.since = time.Now().Add(-time.Hour)
	f.add(jobraft.Event{Index: 1, Kind: jobraft.EventSubmitted, JobID: "a", Queue: "q", State: jobraft.StatePending, Time: t0})
	f.add(jobraft.Event{Index: 2, Kind: jobraft.EventClaimed, JobID: "a", Queue: "q", JobKind: "k", State: jobraft.StateRunning, Time: t0.Add(40 * time.Millisecond)})
	f.add(jobraft.Event{Index: 3, Kind: jobraft.EventAcked, JobID: "a", Queue: "q", State: jobraft.StateSucceeded, Time: t0.Add(100 * time.Millisecond)})
	r := f.rates("q")
	if r.WaitP50 != 40*time.Millisecond || r.WaitMax != 40*time.Millisecond || r.RunP50 != 60*time.Millisecond || r.Samples != 1 {
		t.Errorf("rates %+v", r)
	}
	s := f.series(time.Now())
	n := len(s.Submitted)
	if n != rateSlots || s.Submitted[n-1] != 1 || s.Acked[n-1] != 1 || s.WaitP50[n-1] != 40 || s.RunP50[n-1] != 60 || s.WaitP50[0] != -1 {
		t.Errorf("series: %d points, last submitted %d acked %d wait %v run %v", n, s.Submitted[n-1], s.Acked[n-1], s.WaitP50[n-1], s.RunP50[n-1])
	}
}

// The banner says when this member reaches fewer voters than a quorum
// (naming those that do not answer) and nothing when it reaches enough.
func TestConsoleQuorumBanner(t *testing.T) {
	h := &clusterHealth{Voters: []string{"a", "b", "c"}, Reachable: []string{"a"}, Missing: []string{"b", "c"}, Need: 2, Leader: "a"}
	if b := h.Banner(); !strings.HasPrefix(b, "Quorum lost: this member reaches 1 of 3 voters, a quorum needs 2 (not answering: b, c).") {
		t.Errorf("quorum lost: %q", b)
	}
	h = &clusterHealth{Voters: []string{"a", "b", "c"}, Reachable: []string{"a", "b"}, Need: 2, Quorum: true, Leader: "a"}
	if b := h.Banner(); b != "" {
		t.Errorf("quorum: %q", b)
	}
	h.Leader = ""
	if b := h.Banner(); !strings.HasPrefix(b, "No leader known") {
		t.Errorf("no leader: %q", b)
	}
	var none *clusterHealth
	if none.Banner() != "" {
		t.Error("nil health has a banner")
	}
}

// The progress bar counts from the lag this console first saw a member
// catching up with (a snapshot by its bytes), and forgets it after.
func TestConsoleCatchUpProgress(t *testing.T) {
	c := &console{}
	st := &client.Status{}
	st.LeaderID = "n1"
	m := client.Member{ID: "n4", Status: st}
	p := &raft.MemberProgress{State: raft.StateCatchingUp, Lag: 100, ETA: 3 * time.Second}
	if r := c.rowOf(m, "n1", 0, p); r.Progress != 0 || r.ETA != "about 3s" {
		t.Errorf("first sight: %v %q", r.Progress, r.ETA)
	}
	p.Lag, p.ETA = 40, -1
	if r := c.rowOf(m, "n1", 0, p); r.Progress != 0.6 || r.ETA != "unknown" {
		t.Errorf("60%% done: %v %q", r.Progress, r.ETA)
	}
	p.State = raft.StateCaughtUp
	if r := c.rowOf(m, "n1", 0, p); r.Progress != -1 {
		t.Errorf("caught up: progress %v", r.Progress)
	}
	snap := &raft.MemberProgress{State: raft.StateCatchingUp, Installing: true, SnapshotSize: 1000, SnapshotBytesRemaining: 250}
	if r := c.rowOf(m, "n1", 0, snap); r.Progress != 0.75 {
		t.Errorf("snapshot: %v", r.Progress)
	}
	if r := c.rowOf(client.Member{ID: "n4", Error: "refused"}, "n1", 0, p); r.Up || r.Progress != -1 || r.CatchUp != "down: refused" {
		t.Errorf("down: %+v", r)
	}
}
