package chaos

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every generated schedule is valid and survives print → parse unchanged.
func TestScheduleRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		s := Generate(seed, GenOptions{})
		if err := s.Validate(); err != nil {
			t.Fatalf("seed %d: generated an invalid schedule: %v\n%s", seed, err, s)
		}
		p, err := Parse(s.String())
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, s)
		}
		if !reflect.DeepEqual(p, s) {
			t.Fatalf("seed %d: round trip changed the schedule:\n%s\n---\n%s", seed, s, p)
		}
		if g := Generate(seed, GenOptions{}); !reflect.DeepEqual(g, s) {
			t.Fatalf("seed %d: generation is not deterministic", seed)
		}
	}
}

// The generator keeps its constraints: member faults never overlap on one
// member, bit flips hit a minority and are the last fault of their member,
// every action ends by the span.
func TestGenerateConstraints(t *testing.T) {
	kinds := map[Kind]int{}
	for seed := uint64(1); seed <= 1000; seed++ {
		s := Generate(seed, GenOptions{})
		per := make([][]Action, s.Members)
		flips := 0
		for _, a := range s.Actions {
			kinds[a.Kind]++
			if a.End() > s.Span {
				t.Fatalf("seed %d: %s ends after the span %s", seed, a, s.Span)
			}
			switch a.Kind {
			case Kill, Pause, Fsync, DiskFull, Skew, BitFlip, Lie, PowerLoss:
				m := a.Members[0]
				if m < 0 {
					continue // resolved at run time; a clash is skipped there
				}
				if overlaps(per[m], a) {
					t.Fatalf("seed %d: member faults overlap on m%d:\n%s", seed, m, s)
				}
				for _, b := range per[m] {
					if b.Kind == BitFlip {
						t.Fatalf("seed %d: m%d targeted after its bit flip:\n%s", seed, m, s)
					}
				}
				per[m] = append(per[m], a)
				if a.Kind == BitFlip {
					flips++
				}
			}
		}
		if flips > (s.Members-1)/2 {
			t.Fatalf("seed %d: %d bit flips in %d members", seed, flips, s.Members)
		}
		// Membership: at most maxSpare spares, each added once; removals
		// and replacements (in any order of their times, adds not
		// counted) keep two voters and a live majority of them when every
		// flipped member stays down; no flipped member is removed.
		removed, replaced := 0, 0
		for _, a := range s.Actions {
			switch a.Kind {
			case Remove:
				removed++
			case Replace:
				replaced = 1
			}
			if (a.Kind == Remove || a.Kind == Replace) && a.Members[0] >= 0 && a.Members[0] < len(per) {
				for _, b := range per[a.Members[0]] {
					if b.Kind == BitFlip {
						t.Fatalf("seed %d: a flipped member removed:\n%s", seed, s)
					}
				}
			}
		}
		if v := s.Members - removed - replaced; s.Spare > maxSpare || v < 2 || v-flips <= v/2 {
			t.Fatalf("seed %d: %d spares, %d removals, %d replacing, %d flips in %d members:\n%s", seed, s.Spare, removed, replaced, flips, s.Members, s)
		}
	}
	for _, w := range append(weights, struct {
		kind Kind
		w    int
	}{Lie, 0}, struct {
		kind Kind
		w    int
	}{PowerLoss, 0}) {
		if kinds[w.kind] == 0 {
			t.Errorf("kind %s never generated in 1000 seeds", w.kind)
		}
	}
}

func TestParseRefusesBadSchedules(t *testing.T) {
	for _, text := range []string{
		"",
		"chaos v2 seed=1 members=3 span=1s",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 2s kill m0",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 1s kill m3",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 1s explode m0",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 1s partition m0 m1 m2 | rest",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 1s flap m0 m1",
		"chaos v1 seed=1 members=3 span=1s\nat zero kill m0",
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s add m2",               // not a spare
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s add m4",               // no such slot
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s add m3\nat 1s add m3", // added twice
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s replace m0 m3 m3",     // three members
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s replace m0 leader",    // a role for the spare
		"chaos v1 seed=1 members=3 spare=1 span=1s\nat 0s for 100ms remove m0",  // instant
		"chaos v1 seed=1 members=3 spare=-1 span=1s",
		"chaos v1 seed=1 members=3 spare=1 spare=2 span=1s",
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 100ms powerloss",       // no member
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 100ms powerloss m0 m1", // two
		"chaos v1 seed=1 members=3 span=1s\nat 0s for 2s powerloss m0",       // past the span
	} {
		if _, err := Parse(text); !errors.Is(err, ErrSchedule) {
			t.Errorf("Parse(%q) = %v, want ErrSchedule", text, err)
		}
	}
	s, err := Parse("# a comment\nchaos v1 seed=7 members=3 span=1s\n\nat 500ms for 200ms pause m1\nat 100ms transfer\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Actions) != 2 || s.Actions[0].Kind != Transfer || s.Actions[1].At != 500*time.Millisecond {
		t.Fatalf("parsed %+v", s)
	}
}

// A membership schedule parses to spares and instant changes, and prints
// back to the same text.
func TestParseMembership(t *testing.T) {
	text := `chaos v1 seed=9 members=3 spare=2 span=2s
at 100ms add m3
at 200ms for 300ms kill m3
at 500ms remove leader
at 700ms replace m1 m4
at 800ms for 400ms stall follower delay=250ms
at 800ms for 400ms oneway leader follower2
`
	s, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if s.Spare != 2 || s.Slots() != 5 || len(s.Actions) != 6 {
		t.Fatalf("parsed %+v", s)
	}
	if a := s.Actions[3]; a.Kind != Replace || !reflect.DeepEqual(a.Members, []int{1, 4}) || a.For != 0 {
		t.Fatalf("replace parsed as %+v", a)
	}
	if got := s.String(); got != text {
		t.Fatalf("printed\n%s\nwant\n%s", got, text)
	}
	if strings.Contains(Schedule{Seed: 1, Members: 3, Span: time.Second}.String(), "spare") {
		t.Fatal("a schedule without spares prints a spare count")
	}
}

// A power loss names one member (or a role) and has a span (the restart
// follows it), and prints back to the same text.
func TestParsePowerLoss(t *testing.T) {
	text := `chaos v1 seed=9 members=3 span=2s
at 100ms for 300ms powerloss m1
at 800ms for 150ms stall leader delay=500ms
at 850ms for 250ms powerloss leader
`
	s, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Actions[0]; a.Kind != PowerLoss || !reflect.DeepEqual(a.Members, []int{1}) || a.For != 300*time.Millisecond {
		t.Fatalf("powerloss m1 parsed as %+v", a)
	}
	if a := s.Actions[2]; a.Kind != PowerLoss || !reflect.DeepEqual(a.Members, []int{Leader}) || a.End() != 1100*time.Millisecond {
		t.Fatalf("powerloss leader parsed as %+v", a)
	}
	if got := s.String(); got != text {
		t.Fatalf("printed\n%s\nwant\n%s", got, text)
	}
}

// About one seed in powerLossEvery gets a power loss, half on the leader,
// and half of those with the leader's disk stalled just before it (a stall
// on the leader, which nothing else generates, ending after the loss).
func TestGeneratePowerLoss(t *testing.T) {
	const seeds = 2000
	with, leader, stalled := 0, 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		s := Generate(seed, GenOptions{})
		var pl, st []Action
		for _, a := range s.Actions {
			switch {
			case a.Kind == PowerLoss:
				pl = append(pl, a)
			case a.Kind == Stall && a.Members[0] == Leader:
				st = append(st, a)
			}
		}
		if len(pl) > 1 || len(st) > len(pl) {
			t.Fatalf("seed %d: %d power losses, %d leader stalls:\n%s", seed, len(pl), len(st), s)
		}
		if len(pl) == 0 {
			continue
		}
		with++
		if pl[0].Members[0] == Leader {
			leader++
		}
		if len(st) == 1 {
			stalled++
			if pl[0].Members[0] != Leader || st[0].At >= pl[0].At || st[0].End() <= pl[0].At {
				t.Fatalf("seed %d: the stall does not cover the leader's power loss:\n%s", seed, s)
			}
		}
	}
	// Expected about 2000/4 less the lying-disk composites and the draws
	// on a busy member; half and a quarter of those.
	if with < seeds/8 || with > seeds/3 || leader < with/3 || stalled < with/8 {
		t.Fatalf("%d seeds of %d with a power loss, %d on the leader, %d of them stalled", with, seeds, leader, stalled)
	}
	t.Logf("%d seeds of %d with a power loss, %d on the leader, %d of them stalled", with, seeds, leader, stalled)
}
