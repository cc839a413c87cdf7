package coalesce

import "testing"

// TestDecide: the hold decision, step by step, from data.
func TestDecide(t *testing.T) {
	on := holdState{}
	held := func(want int) holdState { return holdState{holding: true, want: want} }
	missed := func(misses, skipped int) holdState { return holdState{misses: misses, skipped: skipped} }
	for _, c := range []struct {
		name string
		s    holdState
		e    step
		want holdState
		v    verdict
	}{
		{"an entry of one starts no hold", on, step{kind: answered, n: 1, queued: 5}, on, none},
		{"the hold off: no hold", holdState{never: true}, step{kind: answered, n: 8}, holdState{never: true}, none},
		{"an entry of two holds for them and those queued", on, step{kind: answered, n: 2, queued: 3}, held(5), begin},
		{"an entry answered during a hold adds its callers", held(5), step{kind: answered, n: 1, queued: 4}, held(6), none},
		{"an entry of two answered during a hold adds both", held(5), step{kind: answered, n: 2, queued: 1}, held(7), none},
		{"an arrival short of the want holds on", held(5), step{kind: arrived, queued: 4}, held(5), none},
		{"the arrival that fills the hold releases it", held(5), step{kind: arrived, queued: 5}, holdState{want: 5}, release},
		{"a fill forgets the misses", holdState{holding: true, want: 2, misses: 3, skipped: 0}, step{kind: arrived, queued: 2}, holdState{want: 2}, release},
		{"an arrival without a hold", on, step{kind: arrived, queued: 9}, on, none},
		{"the timer ends a hold: a miss", held(5), step{kind: timedOut}, holdState{want: 5, misses: 1}, expire},
		{"a timer after the hold ended does nothing", missed(1, 0), step{kind: timedOut}, missed(1, 0), none},
		{"two misses still hold", missed(2, 0), step{kind: answered, n: 2}, holdState{holding: true, want: 2, misses: 2}, begin},
		{"after holdMisses misses an entry is skipped", missed(holdMisses, 0), step{kind: answered, n: 2}, missed(holdMisses, 1), none},
		{"skipped entries count up to the probe", missed(holdMisses, holdProbe-2), step{kind: answered, n: 2}, missed(holdMisses, holdProbe-1), none},
		{"the probe holds", missed(holdMisses, holdProbe-1), step{kind: answered, n: 2, queued: 1}, holdState{holding: true, want: 3, misses: holdMisses}, begin},
		{"an entry of one counts toward no probe", missed(holdMisses, 4), step{kind: answered, n: 1}, missed(holdMisses, 4), none},
	} {
		got, v := decide(c.s, c.e)
		if got != c.want || v != c.v {
			t.Errorf("%s: decide(%+v, %+v) = %+v, %d; want %+v, %d", c.name, c.s, c.e, got, v, c.want, c.v)
		}
	}
}
