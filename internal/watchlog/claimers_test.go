package watchlog

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// lineRecorder is a Recorder and the applier of commands to it.
type lineRecorder struct {
	*Recorder
	t     *testing.T
	index uint64
	n     int // jobs submitted
}

func newLine(t *testing.T) *lineRecorder {
	return &lineRecorder{Recorder: New(100, 1<<20), t: t}
}

func (l *lineRecorder) apply(c fsm.Command) fsm.Result {
	l.t.Helper()
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		l.t.Fatal(err)
	}
	l.index++
	res, err := fsm.DecodeResult(l.Apply(raft.Entry{Index: l.index, Term: 1, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Cmd: b}))
	if err != nil || res.Err() != nil {
		l.t.Fatalf("entry %d: %v %v", l.index, err, res.Err())
	}
	return res
}

// submit submits one job of queue and kind per kinds entry, in one entry.
func (l *lineRecorder) submit(queue string, kinds ...string) {
	l.t.Helper()
	cmd := &fsm.SubmitCmd{}
	for _, k := range kinds {
		l.n++
		cmd.Jobs = append(cmd.Jobs, fsm.NewJob{ID: fmt.Sprint("j", l.n), Queue: queue, Kind: k})
	}
	l.apply(cmd)
}

// woken reports which of ws are woken.
func woken(ws ...*Claimer) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		out[i] = closed(w.Woken())
	}
	return out
}

func bools(s string) []bool {
	out := make([]bool, len(s))
	for i := range s {
		out[i] = s[i] == '1'
	}
	return out
}

// A submit of one job wakes exactly one of the claims waiting for its
// queue, the first in line, with a turn for that job; the others keep
// waiting, and the next jobs wake them in line, each as many as it asked
// for at most.
func TestSubmitWakesClaimsInLine(t *testing.T) {
	l := newLine(t)
	var ws []*Claimer
	for range 4 {
		ws = append(ws, l.WaitClaim([]string{"q"}, nil, 1))
	}
	other := l.WaitClaim([]string{"other"}, nil, 1)
	l.submit("q", "k")
	if got := woken(append(ws, other)...); !slices.Equal(got, bools("10000")) {
		t.Fatalf("after one job: woken %v, want only the first in line", got)
	}
	if turns := l.Withdraw(ws[0]); !slices.Equal(turns, []Turn{{Queue: "q", Kind: "k", N: 1}}) {
		t.Fatalf("the woken claim's turns: %+v", turns)
	}
	if n := l.Claiming(); n != 4 {
		t.Fatalf("%d claims waiting, want 4 (3 on q, 1 on other)", n)
	}
	l.submit("q", "k", "k")
	if got := woken(ws[1:]...); !slices.Equal(got, bools("110")) {
		t.Fatalf("after two jobs: woken %v, want the next two in line", got)
	}
	// A claim of up to 3 jobs, registered after ws[3], takes what is
	// left of a 5-job submit after ws[3]'s one: 3; 1 is for nobody.
	big := l.WaitClaim([]string{"q"}, nil, 3)
	l.submit("q", "k", "k", "k", "k", "k")
	if !closed(ws[3].Woken()) || !closed(big.Woken()) {
		t.Fatal("a five-job submit did not wake both claims waiting")
	}
	if turns := l.Withdraw(big); !slices.Equal(turns, []Turn{{Queue: "q", Kind: "k", N: 3}}) {
		t.Fatalf("the 3-job claim's turns: %+v", turns)
	}
	if closed(other.Woken()) || l.Claiming() != 1 {
		t.Fatalf("the claim on another queue was woken (%v), or claims on q still wait (%d waiting)", closed(other.Woken()), l.Claiming())
	}
}

// Turns go by kind: a claim limited to other kinds is passed over, not
// woken, and the next claim that takes the kind gets the turn.
func TestSubmitWakesByKind(t *testing.T) {
	l := newLine(t)
	onlyA := l.WaitClaim([]string{"q"}, []string{"a"}, 1)
	anyKind := l.WaitClaim([]string{"q", "r"}, nil, 1)
	onlyB := l.WaitClaim([]string{"q"}, []string{"b"}, 1)
	l.submit("q", "b")
	if got := woken(onlyA, anyKind, onlyB); !slices.Equal(got, bools("010")) {
		t.Fatalf("a job of kind b woke %v, want the any-kind claim first in line for it", got)
	}
	l.submit("q", "b")
	if got := woken(onlyA, onlyB); !slices.Equal(got, bools("01")) {
		t.Fatalf("a second job of kind b woke %v, want the kind-b claim", got)
	}
	if l.Claiming() != 1 {
		t.Fatalf("%d claims waiting, want 1", l.Claiming())
	}
}

// A woken claim that does not take its job passes the turn to the next
// claim in line; a claim that is proposing is last in line, woken only
// when no idle claim has room; a change whose jobs are not counted (a nak
// that put one back) wakes every waiting claim.
func TestTurnsPassOn(t *testing.T) {
	l := newLine(t)
	first := l.WaitClaim([]string{"q"}, nil, 1)
	second := l.WaitClaim([]string{"q"}, nil, 1)
	l.submit("q", "k")
	turns := l.Withdraw(first) // woken, then canceled before it proposed
	if closed(second.Woken()) {
		t.Fatal("the second claim was woken by the first job")
	}
	l.Pass(turns)
	if !closed(second.Woken()) || !slices.Equal(l.Withdraw(second), turns) {
		t.Fatal("the turn passed on did not wake the next claim with it")
	}

	proposing := l.WaitClaim([]string{"q"}, nil, 1)
	idle := l.WaitClaim([]string{"q"}, nil, 1)
	if got := l.Proposing(proposing); len(got) != 0 {
		t.Fatalf("turns before any job: %+v", got)
	}
	l.submit("q", "k")
	if got := woken(proposing, idle); !slices.Equal(got, bools("01")) {
		t.Fatalf("woken %v, want the idle claim before the proposing one", got)
	}
	l.submit("q", "k")
	if !closed(proposing.Woken()) {
		t.Fatal("a job with no idle claim in line did not wake the proposing one")
	}
	l.Withdraw(idle)
	l.Withdraw(proposing)

	// A nak that puts a job back wakes every waiting claim.
	claimed := l.apply(&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute})
	a, b := l.WaitClaim([]string{"q"}, nil, 1), l.WaitClaim([]string{"q"}, []string{"other"}, 1)
	l.apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.NakCmd{ID: claimed.Jobs[0].ID, Token: claimed.Jobs[0].Lease.Token}}})
	if got := woken(a, b); !slices.Equal(got, bools("11")) {
		t.Fatalf("a nak woke %v, want every waiting claim", got)
	}
	if l.Claiming() != 0 {
		t.Fatalf("%d claims still waiting", l.Claiming())
	}
}

// LeaseEnd decodes an undecoded batch only when it touches the job asked
// about, and finds the end there; a lease command proposed alone is
// recorded undecoded as a batch is (its job's Finished wait woken all the
// same).
func TestLeaseEndDecodesOnlyBatchesOfItsJob(t *testing.T) {
	l := newLine(t)
	l.submit("q", "k", "k")
	claimed := l.apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Minute}}})
	j0, j1 := claimed.Batch[0].Jobs[0], claimed.Batch[0].Jobs[1]
	l.apply(&fsm.BatchCmd{Cmds: []fsm.Command{&fsm.AckCmd{ID: j1.ID, Token: j1.Lease.Token}}})
	if _, _, ok := l.LeaseEnd(j0.ID, j0.Lease.Token); ok {
		t.Fatalf("an end found for %s, whose lease runs", j0.ID)
	}
	if last := l.ring[len(l.ring)-1]; last.raw == nil {
		t.Fatal("LeaseEnd decoded a batch that does not touch its job")
	}
	if kind, _, ok := l.LeaseEnd(j1.ID, j1.Lease.Token); !ok || kind != EventAcked {
		t.Fatalf("LeaseEnd of %s = %v, %v; want acked", j1.ID, kind, ok)
	}
	done, stop := l.Finished(j0.ID)
	defer stop()
	l.apply(&fsm.AckCmd{ID: j0.ID, Token: j0.Lease.Token})
	if last := l.ring[len(l.ring)-1]; last.raw == nil || !closed(done) {
		t.Fatalf("an ack alone: recorded undecoded %v, its job's wait woken %v", last.raw != nil, closed(done))
	}
	if kind, _, ok := l.LeaseEnd(j0.ID, j0.Lease.Token); !ok || kind != EventAcked {
		t.Fatalf("LeaseEnd of %s = %v, %v; want acked", j0.ID, kind, ok)
	}
}
