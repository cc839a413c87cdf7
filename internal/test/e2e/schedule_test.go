package e2e_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Two schedules (every second by interval with catch-up one, every second
// by cron with catch-up skip) run on three member processes while the
// leader is SIGKILLed just after a tick fired, twice, and restarted.
// Afterwards every member holds, for each schedule, exactly one job per
// tick from its create to its next tick, none early, the ticks without
// one accounted as missed by the catch-up policy (clustertest.CheckTicks),
// and the schedules kept firing under each new leader.
func TestScheduleLeaderKilledBetweenTicks(t *testing.T) {
	p := clustertest.StartCtlProcs(t, 3, nil)
	l := p.WaitLeader(wait)
	specs := []clustertest.ScheduleSpec{
		{ID: "every", Queue: "sched", Every: time.Second, CatchUp: "one"},
		{ID: "cron", Queue: "sched", Cron: "* * * * * *", CatchUp: "skip"},
	}
	for _, sp := range specs {
		// On a follower: forwarded to the leader.
		rep, err := p.CallT((l+1)%3, "/schedule", clustertest.Request{Schedule: &sp}, 10*time.Second)
		if err != nil || rep.Outcome != clustertest.OutcomeOK {
			t.Fatalf("create %s: %v %s", sp.ID, err, rep.Error)
		}
	}
	fired := func(m int, id string) uint64 {
		rep, err := p.CallT(m, "/schedule-get", clustertest.Request{ID: id}, 5*time.Second)
		if err != nil || rep.Outcome != clustertest.OutcomeOK || rep.Schedule == nil {
			return 0
		}
		return rep.Schedule.Fired
	}
	for round := 0; round < 2; round++ {
		l = p.WaitLeader(wait)
		other := (l + 1) % 3
		before := fired(other, "every")
		clustertest.WaitFor(t, wait, "a tick fired", func() bool { return fired(other, "every") > before })
		p.Kill(l) // just after a tick: the next is due within a second
		nl := p.WaitLeader(wait)
		after := fired(nl, "every")
		clustertest.WaitFor(t, wait, "two ticks under the new leader", func() bool { return fired(nl, "every") >= after+2 })
		t.Logf("round %d: killed leader p%d just after tick %d; p%d fired up to %d", round, l, before+1, nl, fired(nl, "every"))
		p.Start(l)
	}
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	for i := 0; i < 3; i++ {
		rep, err := p.CallT(i, "/list", clustertest.Request{Queue: "sched", Local: true}, 10*time.Second)
		if err != nil || rep.Outcome != clustertest.OutcomeOK {
			t.Fatalf("list on p%d: %v %s", i, err, rep.Error)
		}
		for _, sp := range specs {
			srep, err := p.CallT(i, "/schedule-get", clustertest.Request{ID: sp.ID, Local: true}, 5*time.Second)
			if err != nil || srep.Schedule == nil {
				t.Fatalf("schedule %s on p%d: %v %s", sp.ID, i, err, srep.Error)
			}
			s := srep.Schedule
			if s.Fired < 6 {
				t.Errorf("p%d: schedule %s fired %d jobs over the test", i, sp.ID, s.Fired)
			}
			for _, v := range clustertest.CheckTicks(*s, rep.Jobs) {
				t.Errorf("p%d: schedule %s: %s", i, sp.ID, v)
			}
			if i == 0 {
				t.Logf("schedule %s: fired %d, missed %d", sp.ID, s.Fired, s.Missed)
			}
		}
	}
}
