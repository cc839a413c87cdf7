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
			case Kill, Pause, Fsync, DiskFull, Skew, BitFlip, Lie:
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
	}{Lie, 0}) {
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
