package e2e_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A chain a → b → c and a batch (whose third member waits for its first)
// are worked off across two SIGKILLs of the leader: a dependent is never
// claimable before its parent's ack, the waiting state and the batch's
// counts survive each new leader (they are replicated state, not a
// leader's memory), and the batch's completion job is created exactly
// once, after its last member ended.
func TestDependenciesAcrossLeaderKills(t *testing.T) {
	p := clustertest.StartCtlProcs(t, 3, nil)
	p.WaitLeader(wait)
	call := func(path string, req clustertest.Request) clustertest.Reply {
		t.Helper()
		var rep clustertest.Reply
		clustertest.WaitFor(t, wait, path+" answered", func() bool {
			var err error
			rep, err = p.CallT(p.WaitLeader(wait), path, req, 5*time.Second)
			return err == nil && rep.Outcome != clustertest.OutcomeUnknown && rep.Outcome != clustertest.OutcomeMayExist && !rep.NoLeader
		})
		return rep
	}
	must := func(path string, req clustertest.Request) clustertest.Reply {
		t.Helper()
		rep := call(path, req)
		if rep.Outcome != clustertest.OutcomeOK {
			t.Fatalf("%s %+v: %s %s", path, req, rep.Outcome, rep.Error)
		}
		return rep
	}
	state := func(id string) string {
		t.Helper()
		rep := must("/get", clustertest.Request{ID: id})
		if rep.Job == nil {
			return "absent"
		}
		return rep.Job.State
	}
	// claimAck claims queue q, expecting job want (or nothing: ""), and
	// acks what it got.
	claimAck := func(q, want string) {
		t.Helper()
		rep := must("/claim", clustertest.Request{Queue: q, Worker: "w", TTL: time.Minute})
		got := ""
		if len(rep.Jobs) == 1 {
			got = rep.Jobs[0].ID
		}
		if got != want {
			t.Fatalf("claim of %s got %q, want %q", q, got, want)
		}
		if got != "" {
			must("/ack", clustertest.Request{ID: got, Token: rep.Jobs[0].Token})
		}
	}
	kill := func() {
		l := p.WaitLeader(wait)
		p.Kill(l)
		t.Logf("killed leader p%d; new leader p%d", l, p.WaitLeader(wait))
		p.Start(l)
	}

	must("/submit", clustertest.Request{ID: "a", Queue: "chain"})
	must("/submit", clustertest.Request{ID: "b", Queue: "chain", After: []string{"a"}})
	must("/submit", clustertest.Request{ID: "c", Queue: "chain", After: []string{"b"}})
	if rep := call("/submit", clustertest.Request{ID: "x", Queue: "chain", After: []string{"nope"}}); rep.Outcome != clustertest.OutcomeNotSubmitted {
		t.Fatalf("a job after an unknown parent: %s", rep.Outcome)
	}
	rep := must("/create-batch", clustertest.Request{Batch: "B", Queue: "bq", ID: "B-done", Payload: "done",
		IDs: []string{"m1", "m2", "m3"}, Payloads: []string{"1", "2", "3"}, Afters: [][]string{nil, nil, {"m1"}}})
	if len(rep.Outcomes) != 3 {
		t.Fatalf("create-batch outcomes %v", rep.Outcomes)
	}
	kill()
	if s := state("b"); s != "waiting" {
		t.Fatalf("b is %s after the kill, want waiting", s)
	}
	claimAck("chain", "a")
	kill()
	if s := state("c"); s != "waiting" {
		t.Fatalf("c is %s, want waiting for b", s)
	}
	claimAck("chain", "b")
	claimAck("chain", "c")
	claimAck("bq", "m1")
	claimAck("bq", "m2")
	kill()
	if b := must("/get-batch", clustertest.Request{Batch: "B"}).Batch; b == nil || b.Done || b.Succeeded != 2 {
		t.Fatalf("batch after two of three members: %+v", b)
	}
	claimAck("bq", "m3")
	if b := must("/get-batch", clustertest.Request{Batch: "B"}).Batch; b == nil || !b.Done || b.Succeeded != 3 || b.Failed != 0 {
		t.Fatalf("batch after its last member: %+v", b)
	}
	p.WaitConverged(wait)
	for i := 0; i < 3; i++ {
		// A member restarted by the last kill may still be catching up.
		var rep clustertest.Reply
		clustertest.WaitFor(t, wait, "the completion job on every member", func() bool {
			var err error
			rep, err = p.CallT(i, "/list", clustertest.Request{Queue: "bq-done", Local: true}, 10*time.Second)
			return err == nil && len(rep.Jobs) > 0
		})
		if len(rep.Jobs) != 1 || rep.Jobs[0].ID != "B-done" {
			t.Fatalf("p%d: completion jobs %+v, want B-done once", i, rep.Jobs)
		}
		m3, err := p.CallT(i, "/get", clustertest.Request{ID: "m3", Local: true}, 10*time.Second)
		if err != nil || m3.Job == nil || m3.Job.Finished.After(rep.Jobs[0].Created) {
			t.Fatalf("p%d: m3 %+v ended after the completion job was created at %v", i, m3.Job, rep.Jobs[0].Created)
		}
	}
	p.CheckApplied(true)
}
