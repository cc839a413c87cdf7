package chaos

import (
	"errors"
	"reflect"
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
			case Kill, Pause, Fsync, DiskFull, Skew, BitFlip:
				m := a.Members[0]
				if m == Leader || m == Isolated {
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
	}
	for _, w := range weights {
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
