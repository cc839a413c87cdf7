package duties

import (
	"testing"
	"time"
)

// jobs is the applied state a tick reads, as data.
type jobs struct {
	due, sweepable bool
	tick           time.Duration // the next schedule tick, from now
	ticks          bool          // a schedule has a tick left
}

func (j jobs) LeaseDue(time.Time) bool                         { return j.due }
func (j jobs) Sweepable(time.Duration, uint32, time.Time) bool { return j.sweepable }
func (j jobs) ScheduleDue(time.Time) (time.Duration, bool)     { return j.tick, j.ticks }

func TestDecide(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	retain := Policy{RetainFor: time.Hour, SweepInterval: time.Minute}
	leading := State{Term: 3, Since: t0, LastSweep: t0}
	for _, tc := range []struct {
		name                string
		s                   State
		tick                Tick
		p                   Policy
		want                State
		expire, sweep, fire bool
		wantSince           time.Time // the expire's LeaderSince
	}{
		{name: "a follower proposes nothing and forgets its term", s: leading,
			tick: Tick{Leading: false, Term: 3, Now: at(time.Hour), Jobs: jobs{due: true, sweepable: true}}, p: retain},
		{name: "a new term starts both clocks now; a due lease expires with it", s: leading,
			tick: Tick{Leading: true, Term: 4, Now: at(time.Hour), Jobs: jobs{due: true, sweepable: true}}, p: retain,
			want: State{Term: 4, Since: at(time.Hour), LastSweep: at(time.Hour)}, expire: true, wantSince: at(time.Hour)},
		{name: "the same term keeps LeaderSince", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(10 * time.Second), Jobs: jobs{due: true}}, p: retain,
			want: leading, expire: true, wantSince: t0},
		{name: "no due lease: no expire", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(10 * time.Second), Jobs: jobs{}}, p: retain, want: leading},
		{name: "a sweep waits for its interval", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(59 * time.Second), Jobs: jobs{sweepable: true}}, p: retain, want: leading},
		{name: "a sweep past its interval with something to remove", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Minute), Jobs: jobs{sweepable: true}}, p: retain,
			want: State{Term: 3, Since: t0, LastSweep: at(time.Minute)}, sweep: true},
		{name: "nothing to remove: no sweep, the sweep clock stays", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Hour), Jobs: jobs{}}, p: retain, want: leading},
		{name: "keep forever, no count limit: never a sweep", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Hour), Jobs: jobs{sweepable: true}},
			p:    Policy{RetainFor: -1, SweepInterval: time.Minute}, want: leading},
		{name: "a due schedule tick fires", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Second), Jobs: jobs{ticks: true}}, p: retain, want: leading, fire: true},
		{name: "a tick not yet due fires nothing", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Second), Jobs: jobs{ticks: true, tick: time.Millisecond}}, p: retain, want: leading},
		{name: "a follower fires nothing", s: leading,
			tick: Tick{Leading: false, Term: 3, Now: at(time.Second), Jobs: jobs{ticks: true}}, p: retain},
		{name: "a count limit alone sweeps", s: leading,
			tick: Tick{Leading: true, Term: 3, Now: at(time.Hour), Jobs: jobs{sweepable: true}},
			p:    Policy{RetainFor: -1, RetainPerQueue: 5, SweepInterval: time.Minute},
			want: State{Term: 3, Since: t0, LastSweep: at(time.Hour)}, sweep: true},
	} {
		got, plan := Decide(tc.s, tc.tick, tc.p)
		if got != tc.want || (plan.Expire != nil) != tc.expire || (plan.Sweep != nil) != tc.sweep || (plan.Fire != nil) != tc.fire {
			t.Errorf("%s: Decide = %+v, expire %v, sweep %v, fire %v; want %+v, %v, %v, %v", tc.name, got,
				plan.Expire != nil, plan.Sweep != nil, plan.Fire != nil, tc.want, tc.expire, tc.sweep, tc.fire)
			continue
		}
		if plan.Expire != nil && (!plan.Expire.LeaderSince.Equal(tc.wantSince) || plan.Expire.Term != tc.want.Term) {
			t.Errorf("%s: expire %+v, want LeaderSince %v in term %d", tc.name, plan.Expire, tc.wantSince, tc.want.Term)
		}
		if plan.Sweep != nil && (plan.Sweep.MaxAge != max(tc.p.RetainFor, 0) || plan.Sweep.MaxPerQueue != tc.p.RetainPerQueue) {
			t.Errorf("%s: sweep %+v, want the policy %+v", tc.name, plan.Sweep, tc.p)
		}
	}
}

func TestWake(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		ok   bool
		want time.Duration
	}{
		{0, false, time.Second},              // no schedule: the tick
		{5 * time.Second, true, time.Second}, // a far tick: the tick
		{200 * time.Millisecond, true, 200 * time.Millisecond},
		{0, true, time.Millisecond}, // due (a fire just raced it): soon, not at once
	} {
		if got := Wake(tc.wait, tc.ok, time.Second); got != tc.want {
			t.Errorf("Wake(%v, %v, 1s) = %v, want %v", tc.wait, tc.ok, got, tc.want)
		}
	}
}
