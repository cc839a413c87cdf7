package jobraft_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// outcomeClasses are the classes an error of claim, ack, nak, extend, term,
// cancel, retry, pause and resume matches exactly one of.
var outcomeClasses = []error{
	jobraft.ErrOutcomeUnknown, jobraft.ErrNotApplied, jobraft.ErrStaleLease, jobraft.ErrNotFound,
	jobraft.ErrInvalidState, jobraft.ErrInvalidRequest, jobraft.ErrQueuePaused, jobraft.ErrClosed,
}

// classesOf lists the outcome classes err matches.
func classesOf(err error) []error {
	var out []error
	for _, c := range outcomeClasses {
		if errors.Is(err, c) {
			out = append(out, c)
		}
	}
	return out
}

// onlyClass fails the test unless err matches class and no other class.
func onlyClass(t *testing.T, what string, err, class error) {
	t.Helper()
	got := classesOf(err)
	if len(got) != 1 || got[0] != class {
		t.Fatalf("%s: %v matches %v, want only %v", what, err, got, class)
	}
}

// patientLeader gives a leader cut off from the others 500 ms before it
// steps down (the test default is 100 ms): enough, on a loaded machine, for
// a proposal made right after the cut to be appended to its log first.
func patientLeader(cfg *jobraft.Config) {
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
}

// leaderOf waits for a leader other than member not whose first entry of
// its term is committed.
func leaderOf(t *testing.T, c *clustertest.CtlCluster, not int) int {
	t.Helper()
	n := -1
	clustertest.WaitFor(t, wait, "a leader among the majority", func() bool {
		for i, ctl := range c.Ctls {
			if i != not && ctl.Node().Status().Role == "Leader" {
				rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				if _, err := ctl.Node().LinearizableRead(rctx); err == nil {
					n = i
					return true
				}
			}
		}
		return false
	})
	return n
}

// An ack whose first attempt's outcome is unknown (its leader was isolated
// after appending it) and whose retry is refused as stale, on a member
// whose event history no longer reaches the lease, cannot be resolved: the
// error matches ErrOutcomeUnknown (and raft.ErrIndeterminate) and nothing
// else. Matching ErrStaleLease as well ("nothing changed") was the bug that
// made porcupine refuse legal histories and jobd answer 409.
func TestUnknownAckRetriedStaleIsOnlyUnknown(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		cfg.WatchRetainEntries = 2 // the history forgets the lease quickly
		patientLeader(cfg)
	})
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 3*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "u", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[l].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"u"}, Worker: "w1"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	w1 := ls[0]
	before := c.Ctls[l].Node().Status().LastIndex

	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	ackErr := make(chan error, 1)
	go func() { ackErr <- w1.Ack(ctx, []byte("w1")) }()
	clustertest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
		return c.Ctls[l].Node().Status().Role != "Leader"
	})
	// Under load the leader may step down before it appends the ack (after
	// a duty of its own): then the first attempt was refused, not unknown,
	// and the retry's refusal is the whole truth.
	appended := holdsAck(t, c.Ctls[l], before, w1.Token)

	// The majority cancels, retries, reclaims and acks the job under a new
	// lease, then submits more: the isolated member's history, once it
	// catches up, starts after w1's lease.
	n := leaderOf(t, c, l)
	if _, err := c.Ctls[n].Cancel(ctx, j.ID, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctls[n].Retry(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	ls2, err := c.Ctls[n].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"u"}, Worker: "w2"})
	if err != nil || len(ls2) != 1 {
		t.Fatalf("second claim: %v %v", ls2, err)
	}
	if err := ls2[0].Ack(ctx, []byte("w2")); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 4; k++ {
		if _, err := c.Ctls[n].Submit(ctx, jobraft.SubmitRequest{Queue: "other", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	fn.Rejoin(addr)
	select {
	case err := <-ackErr:
		if !appended {
			onlyClass(t, "ack refused before any log, then refused stale", err, jobraft.ErrStaleLease)
			t.Logf("the isolated leader stepped down before appending the ack: %v", err)
			return
		}
		onlyClass(t, "ack retried stale after an unknown attempt", err, jobraft.ErrOutcomeUnknown)
		if !errors.Is(err, raft.ErrIndeterminate) || errors.Is(err, raft.ErrRejected) {
			t.Fatalf("ack: %v: want raft.ErrIndeterminate and not raft.ErrRejected", err)
		}
		t.Logf("ack: %v", err)
	case <-ctx.Done():
		t.Fatal("the ack did not return")
	}
	got, err := c.Ctls[n].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StateSucceeded || string(got.Result) != "w2" {
		t.Fatalf("job %+v %v: want succeeded by w2", got, err)
	}
}

// Ack, Nak and Term are idempotent per lease token: repeating one (a
// client's retry after a lost connection) whose first attempt committed
// answers success and changes nothing; a finish by an older token stays
// ErrStaleLease (fencing).
func TestRepeatedFinishIsIdempotent(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, wait)
	watch, err := c.Ctls[f].Watch(ctx, 0, jobraft.WatchFilter{Queues: []string{"rep"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "rep", Kind: "k", Backoff: fsm.Backoff{Base: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	// Nak under the first lease, twice (the second on another member, by a
	// handle that kept only the ID and token).
	l1 := claimOne(t, c.Ctls[l], "rep", 0)
	if err := l1.Nak(ctx, time.Nanosecond, "boom"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ctls[f].LeaseOf(jobraft.Job{ID: j.ID}, l1.Token).Nak(ctx, time.Nanosecond, "boom"); err != nil {
		t.Fatalf("repeated nak: %v", err)
	}
	// Ack under the second lease, twice; the older token stays stale.
	l2 := claimOne(t, c.Ctls[f], "rep", 5*time.Second)
	if l2.Token <= l1.Token {
		t.Fatalf("second token %d not above %d", l2.Token, l1.Token)
	}
	if err := l2.Ack(ctx, []byte("done")); err != nil {
		t.Fatal(err)
	}
	if err := c.Ctls[l].LeaseOf(jobraft.Job{ID: j.ID}, l2.Token).Ack(ctx, []byte("done")); err != nil {
		t.Fatalf("repeated ack: %v", err)
	}
	onlyClass(t, "ack by the older token", l1.Ack(ctx, []byte("late")), jobraft.ErrStaleLease)
	onlyClass(t, "nak by the acking token", l2.Nak(ctx, 0, "no"), jobraft.ErrStaleLease)
	onlyClass(t, "term by the acking token", l2.Term(ctx, "no"), jobraft.ErrStaleLease)
	onlyClass(t, "extend by the acking token", l2.Extend(ctx), jobraft.ErrStaleLease)
	got, err := c.Ctls[f].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StateSucceeded || string(got.Result) != "done" || got.Attempts != 2 {
		t.Fatalf("job %+v %v", got, err)
	}
	if got.LastLease == nil || got.LastLease.Token != l2.Token || got.LastLease.By != jobraft.EndAcked {
		t.Fatalf("last lease %+v, want acked by token %d", got.LastLease, l2.Token)
	}
	// One event per change: repeats made none.
	var kinds []jobraft.EventKind
	for len(kinds) < 5 {
		ev := <-watch
		if ev.Kind == jobraft.EventError {
			t.Fatal(ev.Err)
		}
		kinds = append(kinds, ev.Kind)
	}
	if fmt.Sprint(kinds) != "[submitted claimed naked claimed acked]" {
		t.Fatalf("events %v", kinds)
	}

	// Term, repeated, on a fresh job.
	if _, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: "t", Queue: "rep-t", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	l3 := claimOne(t, c.Ctls[l], "rep-t", 0)
	for k := 0; k < 2; k++ {
		if err := l3.Term(ctx, "bad input"); err != nil {
			t.Fatalf("term %d: %v", k, err)
		}
	}
	onlyClass(t, "ack by the terming token", l3.Ack(ctx, nil), jobraft.ErrStaleLease)
}

// An ack forwarded by a follower whose answer is lost (the leader applied
// it) is retried by the controller; the retry must answer success even
// when the follower's event history no longer reaches the lease (so only
// the state machine can tell that this token's ack finished the job).
func TestAckAnswerLostThenRetriedSucceeds(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		cfg.WatchRetainEntries = 2
	})
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, 3*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "lost", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	lease := claimOne(t, c.Ctls[f], "lost", 5*time.Second)
	// The follower's requests reach the leader; the answers do not.
	la, fa := hraft.ServerAddress(c.Cfgs[l].BindAddr), hraft.ServerAddress(c.Cfgs[f].BindAddr)
	fn.Cut(la, fa)
	ackErr := make(chan error, 1)
	go func() { ackErr <- lease.Ack(ctx, []byte("r")) }()
	clustertest.WaitFor(t, wait, "the ack applied on the leader", func() bool {
		g, err := c.Ctls[l].Get(ctx, j.ID, jobraft.Local)
		return err == nil && g.State == jobraft.StateSucceeded
	})
	for k := 0; k < 4; k++ {
		if _, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "other", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	fn.Heal()
	select {
	case err := <-ackErr:
		if err != nil {
			t.Fatalf("ack whose first attempt committed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the ack did not return")
	}
}

// holdsAck reports whether ctl's log holds, after index from, an ack of
// token (the envelope the node seals commands in is 9 bytes: version and
// the leader's clock).
func holdsAck(t *testing.T, ctl *jobraft.Controller, from, token uint64) bool {
	t.Helper()
	log := ctl.Node().Log()
	last, err := log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := from + 1; i <= last; i++ {
		var e hraft.Log
		if err := log.GetLog(i, &e); err != nil || e.Type != hraft.LogCommand || len(e.Data) < 9 {
			continue
		}
		cmd, err := fsm.DecodeCommand(e.Data[9:])
		if err != nil {
			continue
		}
		cmds := []fsm.Command{cmd}
		if b, ok := cmd.(*fsm.BatchCmd); ok {
			cmds = b.Cmds // acks share entries with other lease commands
		}
		for _, cmd := range cmds {
			if a, ok := cmd.(*fsm.AckCmd); ok && a.Token == token {
				return true
			}
		}
	}
	return false
}

// TestStaleAckNotResolvedAsSuccess: a worker's ack whose first attempt is
// indeterminate (its leader was isolated after appending it) and never
// commits must not be reported as success because, meanwhile, the job was
// canceled, retried (attempts reset), claimed again by another worker and
// acked with the same result: the retry is refused as stale, and the
// resolution by a linearizable read sees "succeeded at attempt 1 with this
// result" although the ack under this token never applied.
func TestStaleAckNotResolvedAsSuccess(t *testing.T) {
	s := seed(t)
	fn := faultnet.New(s)
	c := clustertest.StartCtlsWithFaults(t, 3, fn, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 2*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "stale", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// The lease outlives the test: the job must leave w1 by the cancel
	// below, not by an expiry that a slow election under load could let
	// happen first (the scenario would then be another one).
	ls, err := c.Ctls[l].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"stale"}, Worker: "w1", LeaseTTL: time.Hour})
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	w1 := ls[0]
	before := c.Ctls[l].Node().Status().LastIndex

	// Isolate the leader and ack on it at once: the ack is appended to its
	// log, never committed; the leader steps down and the attempt's outcome
	// is unknown; the worker keeps retrying while isolated.
	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	ackErr := make(chan error, 1)
	go func() { ackErr <- w1.Ack(ctx, nil) }()
	clustertest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
		return c.Ctls[l].Node().Status().Role != "Leader"
	})
	if after := c.Ctls[l].Node().Status().LastIndex; after <= before {
		t.Fatalf("the ack was not appended on the isolated leader (last index %d → %d): setup failed", before, after)
	}

	// The majority elects a leader; the job is canceled, retried, claimed
	// by another worker and acked with the same (empty) result.
	var n int
	clustertest.WaitFor(t, wait, "a leader among the majority", func() bool {
		for i, ctl := range c.Ctls {
			if i != l && ctl.Node().Status().Role == "Leader" {
				n = i
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				_, err := ctl.Node().LinearizableRead(rctx)
				return err == nil
			}
		}
		return false
	})
	if got, err := c.Ctls[n].Get(ctx, j.ID, jobraft.Linearizable); err != nil || got.Lease == nil || got.Lease.Token != w1.Token {
		t.Fatalf("before the cancel the job is %+v (%v), want running under w1's lease %d", got, err, w1.Token)
	}
	if _, err := c.Ctls[n].Cancel(ctx, j.ID, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctls[n].Retry(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	ls2, err := c.Ctls[n].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"stale"}, Worker: "w2"})
	if err != nil || len(ls2) != 1 {
		t.Fatalf("second claim: %v %v", ls2, err)
	}
	if ls2[0].Job.Attempts != w1.Job.Attempts {
		t.Fatalf("attempts %d vs %d", ls2[0].Job.Attempts, w1.Job.Attempts)
	}
	if err := ls2[0].Ack(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// Heal: the isolated member drops its uncommitted ack; the worker's
	// retry is refused as stale. Its ack never applied: reporting success
	// would accept a fenced ack.
	fn.Rejoin(addr)
	select {
	case err := <-ackErr:
		if err == nil {
			t.Fatal("the fenced worker's ack was reported successful; it never applied (the job succeeded under another lease)")
		}
		if !errors.Is(err, jobraft.ErrStaleLease) && !errors.Is(err, jobraft.ErrOutcomeUnknown) {
			t.Fatalf("ack: %v", err)
		}
		t.Logf("fenced ack: %v", err)
	case <-ctx.Done():
		t.Fatal("the fenced ack did not return")
	}
}

// A claim forwarded by a follower whose answer is lost (the leader applied
// it and leased the job) is retried with its claim ID; the retry answers
// the very lease the lost attempt granted, instead of an unknown outcome
// that leaves the job leased to nobody until its TTL.
func TestClaimAnswerLostThenRetriedAnswersItsLease(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		cfg.LeaseTTL = time.Minute // the lost lease must not expire meanwhile
	})
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, 3*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "lost", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, wait, "the follower to apply the submit", func() bool {
		_, err := c.Ctls[f].Get(ctx, j.ID, jobraft.Local)
		return err == nil
	})
	// The follower's requests reach the leader; the answers do not.
	la, fa := hraft.ServerAddress(c.Cfgs[l].BindAddr), hraft.ServerAddress(c.Cfgs[f].BindAddr)
	fn.Cut(la, fa)
	type claimed struct {
		ls  []*jobraft.Lease
		err error
	}
	done := make(chan claimed, 1)
	go func() {
		ls, err := c.Ctls[f].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"lost"}, Worker: "w"})
		done <- claimed{ls, err}
	}()
	var running jobraft.Job
	clustertest.WaitFor(t, wait, "the claim applied on the leader", func() bool {
		running, err = c.Ctls[l].Get(ctx, j.ID, jobraft.Local)
		return err == nil && running.State == jobraft.StateRunning
	})
	fn.Heal()
	select {
	case got := <-done:
		if got.err != nil || len(got.ls) != 1 {
			t.Fatalf("claim whose first attempt committed: %d leases, %v", len(got.ls), got.err)
		}
		if got.ls[0].Job.ID != j.ID || got.ls[0].Token != running.Lease.Token {
			t.Fatalf("claim answered %s token %d, want the lost attempt's lease: %s token %d", got.ls[0].Job.ID, got.ls[0].Token, j.ID, running.Lease.Token)
		}
	case <-ctx.Done():
		t.Fatal("the claim did not return")
	}
	now, err := c.Ctls[l].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || now.Attempts != 1 || now.Lease == nil || now.Lease.Token != running.Lease.Token {
		t.Fatalf("job after the claim: %+v, %v: want its first lease, one attempt", now, err)
	}
}
