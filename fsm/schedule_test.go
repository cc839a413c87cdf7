package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// at sets the harness's clock to baseTime + d (one term: log time equals
// the stamps' progress from the first entry, which is at baseTime).
func (h *harness) at(d time.Duration) *harness {
	h.now = baseTime.Add(d)
	return h
}

func (h *harness) fire() []string {
	h.t.Helper()
	return h.ok(FireCmd{}).Fired
}

func (h *harness) sched(id string) Schedule {
	h.t.Helper()
	sc, ok := h.m.Schedule(id)
	if !ok {
		h.t.Fatalf("schedule %q not found", id)
	}
	return sc
}

func every(id string, d time.Duration) ScheduleDef {
	return ScheduleDef{ID: id, Every: d, Job: Template{Queue: "sq", Kind: "tick", Payload: []byte("p")}}
}

func tickIDs(id string, ds ...time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, ScheduleJobID(id, baseTime.Add(d)))
	}
	return out
}

func wantFired(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("fired %q, want %q", got, want)
	}
}

// Each tick fires exactly at its time on the log clock, never before, and
// creates one job named by the schedule and the tick, created at the fire
// entry's log time.
func TestScheduleFiresAtExactTicks(t *testing.T) {
	h := newHarness(t)
	r := h.ok(ScheduleCmd{Def: every("s", 10*time.Second)})
	if !r.Changed || !r.Schedule.Next.Equal(baseTime.Add(10*time.Second)) || !r.Schedule.Created.Equal(baseTime) {
		t.Fatalf("create: %+v", r.Schedule)
	}
	wantFired(t, h.at(10*time.Second-1).fire(), nil)
	if w, ok := h.m.ScheduleDue(h.now); !ok || w != 1 {
		t.Fatalf("ScheduleDue 1ns before the tick: %v %v", w, ok)
	}
	if w, ok := h.m.ScheduleDue(h.now.Add(1)); !ok || w != 0 {
		t.Fatalf("ScheduleDue at the tick: %v %v", w, ok)
	}
	wantFired(t, h.at(10*time.Second).fire(), tickIDs("s", 10*time.Second))
	wantFired(t, h.fire(), nil) // the same log time again: nothing twice
	wantFired(t, h.at(19*time.Second).fire(), nil)
	wantFired(t, h.at(20*time.Second+time.Millisecond).fire(), tickIDs("s", 20*time.Second))
	j, ok := h.m.Get(tickIDs("s", 20*time.Second)[0])
	if !ok || j.State != StatePending || j.Queue != "sq" || j.Kind != "tick" || string(j.Payload) != "p" ||
		!j.Created.Equal(baseTime.Add(20*time.Second+time.Millisecond)) || j.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("fired job %+v", j)
	}
	sc := h.sched("s")
	if sc.Fired != 2 || sc.Missed != 0 || !sc.Next.Equal(baseTime.Add(30*time.Second)) || !sc.LastTick.Equal(baseTime.Add(20*time.Second)) {
		t.Fatalf("schedule %+v", sc)
	}

	// A cron expression with seconds: every 5 s on the wall clock.
	h.ok(ScheduleCmd{Def: ScheduleDef{ID: "c", Cron: "*/5 * * * * *", Job: Template{Queue: "sq", Kind: "k"}}})
	// baseTime is 03:04:05: the first tick is 03:04:10.
	if sc := h.sched("c"); !sc.Next.Equal(baseTime.Add(25 * time.Second)) {
		t.Fatalf("cron next %v, want %v", sc.Next, baseTime.Add(25*time.Second))
	}
	wantFired(t, h.at(25*time.Second).fire(), tickIDs("c", 25*time.Second))
	wantFired(t, h.at(30*time.Second).fire(), append(tickIDs("c", 30*time.Second), tickIDs("s", 30*time.Second)...))
}

// A leader whose clock is behind the log's (a new term) still fires by log
// time: the ticks a new leader sees due are what the log says, and a
// concurrent proposal fires nothing twice.
func TestScheduleAcrossLeadersAndSkew(t *testing.T) {
	h := newHarness(t)
	h.ok(ScheduleCmd{Def: every("s", 10*time.Second)})
	wantFired(t, h.at(10*time.Second).fire(), tickIDs("s", 10*time.Second))
	// A new leader 30 s behind: log time moves on by 1 ns, no tick fires
	// again, none early.
	h.term++
	wantFired(t, h.at(-20*time.Second).fire(), nil)
	// Its clock advancing 10 s moves log time 10 s: the 20 s tick.
	wantFired(t, h.at(-10*time.Second).fire(), tickIDs("s", 20*time.Second))
	// A leader far ahead fires what its log time passed (catch-up).
	h.term++
	wantFired(t, h.at(time.Minute).fire(), tickIDs("s", 30*time.Second, time.Minute))
	if sc := h.sched("s"); sc.Missed != 2 || sc.Fired != 4 {
		t.Fatalf("schedule %+v", sc)
	}
}

func TestScheduleCatchUp(t *testing.T) {
	for _, tc := range []struct {
		policy CatchUp
		fired  []time.Duration
		missed uint64
	}{
		{CatchUpOne, []time.Duration{10 * time.Second, 40 * time.Second}, 2},
		{CatchUpSkip, []time.Duration{40 * time.Second}, 3},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newHarness(t)
			d := every("s", 10*time.Second)
			d.CatchUp = tc.policy
			h.ok(ScheduleCmd{Def: d})
			// No fire for 45 s (no quorum): 10, 20, 30 missed, 40 current.
			wantFired(t, h.at(45*time.Second).fire(), tickIDs("s", tc.fired...))
			sc := h.sched("s")
			if sc.Missed != tc.missed || sc.Fired != uint64(len(tc.fired)) || !sc.Next.Equal(baseTime.Add(50*time.Second)) {
				t.Fatalf("schedule %+v", sc)
			}
			// A late tick whose successor is not due is not missed.
			wantFired(t, h.at(59*time.Second).fire(), tickIDs("s", 50*time.Second))
			if sc := h.sched("s"); sc.Missed != tc.missed {
				t.Fatalf("missed %d after a late tick", sc.Missed)
			}
		})
	}
}

func TestScheduleOverlap(t *testing.T) {
	newSched := func(t *testing.T, o Overlap) *harness {
		h := newHarness(t)
		d := every("s", 10*time.Second)
		d.Overlap = o
		h.ok(ScheduleCmd{Def: d})
		return h
	}
	claim := func(h *harness) Job {
		h.t.Helper()
		return h.claim1("sq", time.Hour)
	}
	t.Run("skip", func(t *testing.T) {
		h := newSched(t, OverlapSkip)
		wantFired(t, h.at(10*time.Second).fire(), tickIDs("s", 10*time.Second))
		wantFired(t, h.at(20*time.Second).fire(), nil) // pending
		j := claim(h)
		wantFired(t, h.at(30*time.Second).fire(), nil) // running
		h.ok(AckCmd{ID: j.ID, Token: j.Lease.Token})
		wantFired(t, h.at(40*time.Second).fire(), tickIDs("s", 40*time.Second))
		if sc := h.sched("s"); sc.Skipped != 2 || sc.Fired != 2 || !slices.Equal(sc.Open, tickIDs("s", 40*time.Second)) {
			t.Fatalf("schedule %+v", sc)
		}
	})
	t.Run("one", func(t *testing.T) {
		h := newSched(t, OverlapOne)
		wantFired(t, h.at(10*time.Second).fire(), tickIDs("s", 10*time.Second))
		wantFired(t, h.at(20*time.Second).fire(), nil) // one queued
		claim(h)
		wantFired(t, h.at(30*time.Second).fire(), tickIDs("s", 30*time.Second)) // the running one does not count
		wantFired(t, h.at(40*time.Second).fire(), nil)
		h.ok(CancelCmd{ID: tickIDs("s", 30*time.Second)[0]})
		wantFired(t, h.at(50*time.Second).fire(), tickIDs("s", 50*time.Second))
		if sc := h.sched("s"); sc.Skipped != 2 || sc.Fired != 3 {
			t.Fatalf("schedule %+v", sc)
		}
	})
	t.Run("allow", func(t *testing.T) {
		h := newSched(t, OverlapAllow)
		wantFired(t, h.at(10*time.Second).fire(), tickIDs("s", 10*time.Second))
		wantFired(t, h.at(20*time.Second).fire(), tickIDs("s", 20*time.Second))
		if sc := h.sched("s"); len(sc.Open) != 0 {
			t.Fatalf("open %q under allow", sc.Open)
		}
	})
}

func TestSchedulePauseResumeDelete(t *testing.T) {
	h := newHarness(t)
	h.ok(ScheduleCmd{Def: every("s", 10*time.Second)})
	if r := h.ok(ScheduleSetCmd{ID: "s", Op: SchedulePause}); !r.Changed || !r.Schedule.Paused {
		t.Fatalf("pause: %+v", r)
	}
	if r := h.ok(ScheduleSetCmd{ID: "s", Op: SchedulePause}); r.Changed {
		t.Fatal("pause of a paused schedule changed it")
	}
	if _, ok := h.m.ScheduleDue(h.now); ok {
		t.Fatal("a paused schedule is due")
	}
	wantFired(t, h.at(25*time.Second).fire(), nil)
	h.ok(ScheduleSetCmd{ID: "s", Op: ScheduleResume})
	if sc := h.sched("s"); sc.Paused || !sc.Next.Equal(baseTime.Add(30*time.Second)) || sc.Missed != 0 {
		t.Fatalf("resumed %+v: ticks while paused never fire", sc)
	}
	wantFired(t, h.at(30*time.Second).fire(), tickIDs("s", 30*time.Second))
	if r := h.ok(ScheduleSetCmd{ID: "s", Op: ScheduleDelete}); !r.Changed || r.Schedule.ID != "s" {
		t.Fatalf("delete: %+v", r)
	}
	wantFired(t, h.at(time.Hour).fire(), nil)
	if _, ok := h.m.Schedule("s"); ok {
		t.Fatal("deleted schedule still listed")
	}
	if _, ok := h.m.Get(tickIDs("s", 30*time.Second)[0]); !ok {
		t.Fatal("a deleted schedule's job is gone")
	}
	for _, op := range []ScheduleOp{SchedulePause, ScheduleResume, ScheduleDelete} {
		h.refused(ScheduleSetCmd{ID: "s", Op: op}, ErrScheduleNotFound)
	}
	// A new create of the ID after the delete starts over.
	if r := h.ok(ScheduleCmd{Def: every("s", time.Minute)}); !r.Changed {
		t.Fatal("create after delete: unchanged")
	}
}

func TestScheduleRefusals(t *testing.T) {
	h := newHarness(t)
	tmpl := Template{Queue: "q", Kind: "k"}
	for _, tc := range []struct {
		def  ScheduleDef
		want error
	}{
		{ScheduleDef{ID: "a", Cron: "not cron", Job: tmpl}, ErrBadCron},
		{ScheduleDef{ID: "a", Cron: "61 * * * *", Job: tmpl}, ErrBadCron},
		{ScheduleDef{ID: "a", Cron: "TZ=Europe/Paris 0 * * * *", Job: tmpl}, ErrBadCron},
		{ScheduleDef{ID: "a", Cron: "@every 1m", Job: tmpl}, ErrBadCron},
		{ScheduleDef{ID: "a", Job: tmpl}, ErrBadInterval},
		{ScheduleDef{ID: "a", Every: -time.Second, Job: tmpl}, ErrBadInterval},
		{ScheduleDef{ID: "a", Every: MinInterval - 1, Job: tmpl}, ErrBadInterval},
		{ScheduleDef{ID: "a", Every: time.Minute, Cron: "* * * * *", Job: tmpl}, ErrInvalidCommand},
		{ScheduleDef{ID: "", Every: time.Minute, Job: tmpl}, ErrInvalidCommand},
		{ScheduleDef{ID: "a/b", Every: time.Minute, Job: tmpl}, ErrInvalidCommand},
		{ScheduleDef{ID: "a:b", Every: time.Minute, Job: tmpl}, ErrInvalidCommand},
		{ScheduleDef{ID: "a", Every: time.Minute}, ErrInvalidCommand},
		{ScheduleDef{ID: "a", Every: time.Minute, Job: tmpl, Overlap: numOverlaps}, ErrInvalidCommand},
		{ScheduleDef{ID: "a", Every: time.Minute, Job: tmpl, Zone: Zone{Shifts: []ZoneShift{{At: 2}, {At: 1}}}}, ErrInvalidCommand},
	} {
		if err := Validate(ScheduleCmd{Def: tc.def}); !errors.Is(err, tc.want) {
			t.Errorf("Validate(%+v) = %v, want %v", tc.def, err, tc.want)
		}
		h.refused(ScheduleCmd{Def: tc.def}, tc.want)
	}
	if _, err := LoadZone("Mars/Olympus_Mons"); !errors.Is(err, ErrUnknownZone) {
		t.Fatalf("LoadZone of an unknown zone: %v", err)
	}
	if _, err := LoadZone("Local"); !errors.Is(err, ErrUnknownZone) {
		t.Fatalf("LoadZone(Local): %v", err)
	}
	d := every("s", time.Minute)
	h.ok(ScheduleCmd{Def: d})
	// The same create again: OK, unchanged (a retry).
	if r := h.ok(ScheduleCmd{Def: d}); r.Changed || r.Schedule.ID != "s" {
		t.Fatalf("repeat: %+v", r)
	}
	other := d
	other.Job.Payload = []byte("other")
	h.refused(ScheduleCmd{Def: other}, ErrScheduleExists)
	other = d
	other.Every = 2 * time.Minute
	h.refused(ScheduleCmd{Def: other}, ErrScheduleExists)
}

// The zone's rules ride in the command: a cron expression's ticks on New
// York's wall clock across both 2026 shifts. A wall time the spring shift
// skips does not fire that day; one the autumn shift repeats fires once.
func TestScheduleDSTEdges(t *testing.T) {
	z, err := LoadZone("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	ticks := func(cron string, from string, n int) []string {
		d := ScheduleDef{ID: "d", Cron: cron, Zone: z}
		var out []string
		t0 := at(from)
		for range n {
			t0 = d.tickAfter(0, t0)
			out = append(out, time.Unix(0, t0).UTC().Format(time.RFC3339))
		}
		return out
	}
	for _, tc := range []struct {
		name, cron, from string
		want             []string
	}{
		{"spring daily 02:30", "30 2 * * *", "2026-03-07T00:00:00Z", []string{
			"2026-03-07T07:30:00Z", // 02:30 EST
			"2026-03-09T06:30:00Z", // 02:30 EDT; 8 March has no 02:30
		}},
		{"autumn daily 01:30", "30 1 * * *", "2026-10-31T00:00:00Z", []string{
			"2026-10-31T05:30:00Z", // 01:30 EDT
			"2026-11-01T05:30:00Z", // 01:30 EDT, once
			"2026-11-02T06:30:00Z", // 01:30 EST
		}},
		{"autumn half-hourly", "*/30 * * * *", "2026-11-01T04:45:00Z", []string{
			"2026-11-01T05:00:00Z", // 01:00 EDT
			"2026-11-01T05:30:00Z", // 01:30 EDT
			"2026-11-01T07:00:00Z", // 02:00 EST: 01:00 and 01:30 EST passed already
			"2026-11-01T07:30:00Z",
		}},
		{"spring half-hourly", "*/30 * * * *", "2026-03-08T06:15:00Z", []string{
			"2026-03-08T06:30:00Z", // 01:30 EST
			"2026-03-08T07:00:00Z", // 03:00 EDT
			"2026-03-08T07:30:00Z",
		}},
	} {
		if got := ticks(tc.cron, tc.from, len(tc.want)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ticks %q, want %q", tc.name, got, tc.want)
		}
	}

	// Through Apply: a daily 01:30 schedule fires once on the day of the
	// autumn shift, with the fire entries' log times crossing it.
	h := newHarness(t)
	h.now = time.Unix(0, at("2026-10-31T12:00:00Z"))
	start := h.now
	h.ok(ScheduleCmd{Def: ScheduleDef{ID: "ny", Cron: "30 1 * * *", Zone: z, Job: Template{Queue: "q", Kind: "k"}}})
	var fired []string
	for now := start; now.Before(start.Add(48 * time.Hour)); now = now.Add(15 * time.Minute) {
		h.now = now
		fired = append(fired, h.fire()...)
	}
	want := []string{ScheduleJobID("ny", time.Unix(0, at("2026-11-01T05:30:00Z"))), ScheduleJobID("ny", time.Unix(0, at("2026-11-02T06:30:00Z")))}
	if !slices.Equal(fired, want) {
		t.Fatalf("fired %q, want %q", fired, want)
	}
}

// Two instances fed the same entries hold the same schedules and digests;
// a difference in a schedule changes the digest.
func TestScheduleDeterminismAndDigest(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	z, _ := LoadZone("Europe/Paris")
	cmds := []struct {
		d time.Duration
		c Command
	}{
		{0, ScheduleCmd{Def: every("i", 7*time.Second)}},
		{time.Second, ScheduleCmd{Def: ScheduleDef{ID: "c", Cron: "*/3 * * * * *", Zone: z, Job: Template{Queue: "q", Kind: "k"}, Overlap: OverlapOne}}},
		{20 * time.Second, FireCmd{}},
		{21 * time.Second, ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute}},
		{40 * time.Second, FireCmd{}},
		{41 * time.Second, ScheduleSetCmd{ID: "i", Op: SchedulePause}},
		{50 * time.Second, FireCmd{}},
	}
	for _, c := range cmds {
		ra, rb := a.at(c.d).ok(c.c), b.at(c.d).ok(c.c)
		if !slices.Equal(ra.Fired, rb.Fired) || a.m.Digest() != b.m.Digest() {
			t.Fatalf("%s: instances differ", c.c.Type())
		}
	}
	if !reflect.DeepEqual(a.m.Schedules(), b.m.Schedules()) || len(a.m.Schedules()) != 2 {
		t.Fatal("schedules differ")
	}
	before := a.m.stateSum()
	b.ok(ScheduleSetCmd{ID: "i", Op: ScheduleResume})
	a.ok(ScheduleSetCmd{ID: "i", Op: SchedulePause}) // unchanged
	if a.m.stateSum() != before || b.m.stateSum() == before {
		t.Fatal("the digest does not follow a schedule's paused flag")
	}
}

func persist(t *testing.T, m *Jobs) []byte {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestScheduleSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	z, _ := LoadZone("Australia/Sydney")
	h.ok(ScheduleCmd{Def: ScheduleDef{ID: "b", Cron: "0 */2 * * *", Zone: z, Job: Template{Queue: "q", Kind: "k", Payload: []byte("x")}, Overlap: OverlapSkip}})
	h.ok(ScheduleCmd{Def: every("a", 5*time.Second)})
	h.at(3 * time.Hour).fire()
	h.ok(ScheduleSetCmd{ID: "a", Op: SchedulePause})
	b := persist(t, h.m)
	r := New()
	if err := r.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if r.Digest() != h.m.Digest() {
		t.Fatal("restored digest differs")
	}
	got, want := r.Schedules(), h.m.Schedules()
	if len(got) != 2 || got[0].ID != "a" || !got[0].Paused || got[1].Fired != want[1].Fired || len(got[1].Open) != 1 || len(got[1].Zone.Shifts) == 0 {
		t.Fatalf("restored schedules %+v", got)
	}
	// Both fire alike afterwards.
	h2 := &harness{t: t, m: r, index: h.index, term: h.term}
	wantFired(t, h2.at(5*time.Hour).fire(), h.at(5*time.Hour).fire())

	// A version 5 stream has no schedules: one without restores (its
	// digest unchanged by this version), one with a schedule record is
	// corrupt.
	plain := newHarness(t)
	plain.submit(NewJob{ID: "j", Queue: "q", Kind: "k"})
	v5 := setSnapVersion(plain.m, persist(t, plain.m), snapV5)
	r5 := New()
	if err := r5.Restore(bytes.NewReader(v5)); err != nil {
		t.Fatalf("version 5 stream: %v", err)
	}
	if r5.Digest() != plain.m.Digest() || len(r5.Schedules()) != 0 {
		t.Fatal("version 5 stream restored with another digest or schedules")
	}
	if err := New().Restore(bytes.NewReader(setSnapVersion(h.m, b, snapV5))); !IsCorrupt(err) {
		t.Fatalf("version 5 stream with a schedule record: %v, want corrupt", err)
	}
}
