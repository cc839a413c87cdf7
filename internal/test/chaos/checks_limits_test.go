package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

func setPlan(q, k int) *limitPlan {
	p := &limitPlan{queueMax: q, kindMax: k, set: make(chan struct{})}
	close(p.set)
	return p
}

func msec(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// lease returns the ops of one lease: its claim (returned at from) and
// its ack (called at to).
func leaseOps(job, kind string, token uint64, from, to int) []Op {
	return []Op{
		{Kind: "lclaim", Job: job, Token: token, Tags: []string{kind}, Call: msec(from - 5), Return: msec(from), Outcome: clustertest.OutcomeOK},
		{Kind: "lack", Job: job, Token: token, Tags: []string{kind}, Call: msec(to), Return: msec(to + 5), Outcome: clustertest.OutcomeOK},
	}
}

// The limit checker fails a history in which more leases than the limit
// are proven running at one instant, of the queue or of the limited kind,
// and passes one in which leases only follow each other or cannot be
// shown to overlap (a settle that was not acknowledged proves nothing).
func TestLimitCheck(t *testing.T) {
	var ok []Op
	ok = append(ok, leaseOps("j1", "a", 10, 100, 200)...)
	ok = append(ok, leaseOps("j2", "b", 11, 150, 300)...)
	ok = append(ok, leaseOps("j3", "a", 12, 200, 400)...) // starts as j1's settle is called: no overlap
	// j4's settle was not acknowledged: its lease may have ended at once.
	ok = append(ok, Op{Kind: "lclaim", Job: "j4", Token: 13, Tags: []string{"b"}, Return: msec(160), Outcome: clustertest.OutcomeOK},
		Op{Kind: "lack", Job: "j4", Token: 13, Call: msec(500), Outcome: "unknown"})
	if v := limitCheck(ok, setPlan(2, 1), -1); !v.OK {
		t.Fatalf("a history within the limits: %s", v)
	}
	over := append(append([]Op{}, ok...), leaseOps("j5", "b", 14, 250, 260)...) // j2, j3, j5 at 255
	if v := limitCheck(over, setPlan(2, 1), -1); v.OK || !strings.Contains(v.Detail, "3 leases of queue lim") {
		t.Fatalf("three leases under a queue limit of 2: %s", v)
	}
	kind := append(append([]Op{}, ok...), leaseOps("j6", "a", 15, 150, 160)...) // j1, j6 of kind a at 155
	if v := limitCheck(kind, setPlan(3, 1), -1); v.OK || !strings.Contains(v.Detail, "2 leases of kind a") {
		t.Fatalf("two leases of kind a under its limit of 1: %s", v)
	}
	// In a lie run the leases acknowledged after the lie began are left out.
	if v := limitCheck(over, setPlan(2, 1), msec(240)); !v.OK {
		t.Fatalf("lie run: %s", v)
	}
}

func uview(id, payload, state string, seq uint64, created, finished int, held bool) clustertest.JobView {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clustertest.JobView{ID: id, Queue: uniqueQueue, State: state, Payload: payload, Seq: seq, Created: base.Add(msec(created)),
		Unique: &clustertest.UniqueView{States: "pending,scheduled,running,succeeded", Held: held}}
	if finished > 0 {
		v.Finished = base.Add(msec(finished))
	}
	return v
}

// The unique checker fails two jobs of one key where the first still held
// it when the second was created, and a job whose holding disagrees with
// its state; it passes a key taken again after its holder was canceled.
func TestUniqueCheck(t *testing.T) {
	good := []clustertest.JobView{
		uview("a", "u0", "canceled", 1, 10, 20, false),
		uview("b", "u0", "succeeded", 2, 30, 40, true),
		uview("c", "u1", "pending", 3, 35, 0, true),
	}
	if v := uniqueCheck(map[int][]clustertest.JobView{0: good, 1: good}); !v.OK {
		t.Fatalf("good: %s", v)
	}
	for name, bad := range map[string][]clustertest.JobView{
		"two holders":         {uview("a", "u0", "pending", 1, 10, 0, true), uview("b", "u0", "pending", 2, 30, 0, true)},
		"canceled too late":   {uview("a", "u0", "canceled", 1, 10, 50, false), uview("b", "u0", "pending", 2, 30, 0, true)},
		"held while canceled": {uview("a", "u0", "canceled", 1, 10, 20, true)},
	} {
		if v := uniqueCheck(map[int][]clustertest.JobView{0: bad}); v.OK {
			t.Errorf("%s: passed", name)
		}
	}
}
