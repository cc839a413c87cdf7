package chaos

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// reachesQuorum: a member reaches a quorum when some majority of the
// voters is up, pairwise linked and holds it or a member linked to it.
func TestReachesQuorum(t *testing.T) {
	voters := []int{0, 1, 2, 3, 4}
	for _, c := range []struct {
		name  string
		down  []int
		cuts  [][2]int
		m     int
		reach bool
	}{
		{"all up and linked", nil, nil, 0, true},
		{"two of five down", []int{3, 4}, nil, 0, true},
		{"three of five down", []int{2, 3, 4}, nil, 0, false},
		{"cut from all, the rest a quorum", nil, [][2]int{{0, 1}, {0, 2}, {0, 3}, {0, 4}}, 0, false},
		{"linked to one member of a quorum it is not in", nil, [][2]int{{0, 2}, {0, 3}, {0, 4}}, 0, true},
		{"linked only to a member outside every quorum", []int{2}, [][2]int{{0, 3}, {0, 4}, {1, 3}, {1, 4}}, 0, false},
		{"four up, no three pairwise linked", []int{4}, [][2]int{{1, 2}, {1, 3}, {2, 3}, {0, 1}, {0, 2}}, 3, false},
		{"pairwise cut everywhere", nil, allPairs(5), 0, false},
	} {
		up := func(x int) bool {
			for _, d := range c.down {
				if d == x {
					return false
				}
			}
			return true
		}
		linked := func(x, y int) bool {
			for _, p := range c.cuts {
				if p == [2]int{x, y} || p == [2]int{y, x} {
					return false
				}
			}
			return true
		}
		if got := reachesQuorum(voters, c.m, up, linked); got != c.reach {
			t.Errorf("%s: m%d reaches a quorum %v, want %v", c.name, c.m, got, c.reach)
		}
	}
}

func allPairs(n int) [][2]int {
	var out [][2]int
	for x := 0; x < n; x++ {
		for y := x + 1; y < n; y++ {
			out = append(out, [2]int{x, y})
		}
	}
	return out
}

// linkCut: partitions, bridges, one-way cuts and mutes cut a link within
// their span; flapping and lossy links, and anything outside the span,
// do not.
func TestLinkCut(t *testing.T) {
	s := Schedule{Members: 3, Span: 10 * time.Second, Actions: []Action{
		{Kind: Partition, At: time.Second, For: time.Second, Members: []int{0}},
		{Kind: Bridge, At: 3 * time.Second, For: time.Second, Members: []int{1, 2}},
		{Kind: OneWay, At: 5 * time.Second, For: time.Second, Members: []int{2, 0}},
		{Kind: Mute, At: 7 * time.Second, For: time.Second, Members: []int{1}},
		{Kind: Flap, At: 9 * time.Second, For: time.Second, Members: []int{0, 1}},
	}}
	for _, c := range []struct {
		x, y int
		at   time.Duration
		cut  bool
	}{
		{0, 1, 1500 * time.Millisecond, true}, {1, 2, 1500 * time.Millisecond, false}, {0, 1, 2 * time.Second, false},
		{1, 2, 3500 * time.Millisecond, true}, {2, 1, 3500 * time.Millisecond, true}, {0, 1, 3500 * time.Millisecond, false},
		{0, 2, 5500 * time.Millisecond, true}, {0, 1, 5500 * time.Millisecond, false},
		{1, 0, 7500 * time.Millisecond, true}, {2, 1, 7500 * time.Millisecond, true}, {0, 2, 7500 * time.Millisecond, false},
		{0, 1, 9500 * time.Millisecond, false},
	} {
		if got := s.linkCut(c.x, c.y, c.at); got != c.cut {
			t.Errorf("m%d–m%d at %s: cut %v, want %v", c.x, c.y, c.at, got, c.cut)
		}
	}
}

// The no-quorum narrative judges operations on cut-off members (the
// survivor of a frozen leader and a killed follower, then an isolated old
// leader), and each is answered within the bound.
func TestLeaderWaitJudgesCutOffMembers(t *testing.T) {
	f := filepath.Join("testdata", "no-quorum.leaderwait")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	res := Run(t, s, Options{PictureDir: t.TempDir()})
	res.Replay = replayFile(f)
	t.Log(line(res))
	for _, v := range res.Failed() {
		t.Error(v)
	}
	for _, v := range res.Verdicts {
		if v.Checker != "leader-wait" {
			continue
		}
		t.Log(v)
		if !v.OK || v.Judged == 0 {
			t.Errorf("leader-wait: %v; want it passing with operations judged", v)
		}
		return
	}
	t.Errorf("no leader-wait verdict among %d", len(res.Verdicts))
}
