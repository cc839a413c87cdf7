package jobraft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// Two acks of one lease with different results, sent at the same instant
// to two different members of a real 3-member cluster (loopback TCP, data
// dirs, fsync): exactly one succeeds; the other is ErrStaleLease (and no
// other class) naming how the lease ended, "acked"; the job holds the
// winner's result. Two identical acks both succeed (the second is the
// first's repeat). Each pair of members in turn: leader and follower, the
// two followers. (Before a repeat had to be the same request, both
// different acks answered success and one worker was told a result was
// recorded that was not.)
func TestDifferentAcksOnTwoMembers(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	f1, f2 := (l+1)%3, (l+2)%3
	pairs := [][2]int{{l, f1}, {f2, l}, {f1, f2}}
	ctx := clustertest.Ctx(t, 3*wait)
	conclusive := 0
	for round := 0; conclusive < 6; round++ {
		if ctx.Err() != nil {
			t.Fatalf("%d conclusive rounds of 6 before the deadline", conclusive)
		}
		p := pairs[round%len(pairs)]
		same := round%4 == 3 // now and then, the identical pair
		queue := fmt.Sprintf("acks-%d", round)
		j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: queue, Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		ls, err := c.Ctls[p[0]].Claim(ctx, jobraft.ClaimRequest{Queues: []string{queue}, Worker: "w", LeaseTTL: time.Hour})
		if err != nil || len(ls) != 1 {
			t.Fatalf("round %d: claim: %v %v", round, ls, err)
		}
		token := ls[0].Token
		results := [2]string{fmt.Sprintf("result-of-m%d-%d", p[0], round), fmt.Sprintf("result-of-m%d-%d", p[1], round)}
		if same {
			results[1] = results[0]
		}
		start := make(chan struct{})
		errs := make(chan struct {
			i   int
			err error
		}, 2)
		for i := range p {
			h := c.Ctls[p[i]].LeaseOf(jobraft.Job{ID: j.ID}, token) // a worker's handle: ID and token
			go func() {
				<-start
				errs <- struct {
					i   int
					err error
				}{i, h.Ack(ctx, []byte(results[i]))}
			}()
		}
		close(start)
		var got [2]error
		for range p {
			e := <-errs
			got[e.i] = e.err
		}
		job, err := c.Ctls[p[1]].Get(ctx, j.ID, jobraft.Linearizable)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != jobraft.StateSucceeded || job.LastLease == nil || job.LastLease.Token != token || job.LastLease.By != jobraft.EndAcked {
			t.Fatalf("round %d: job %s last lease %+v, want succeeded by an ack of lease %d", round, job.State, job.LastLease, token)
		}
		// Safety, whatever happened: a success means the job holds that
		// caller's result.
		for i, err := range got {
			if err == nil && string(job.Result) != results[i] {
				t.Fatalf("round %d: the ack on m%d succeeded with %q, but the job holds %q", round, p[i], results[i], job.Result)
			}
		}
		if errors.Is(got[0], jobraft.ErrOutcomeUnknown) || errors.Is(got[1], jobraft.ErrOutcomeUnknown) {
			t.Logf("round %d: an outcome stayed unknown under load (%v / %v): inconclusive", round, got[0], got[1])
			continue
		}
		conclusive++
		if same {
			if got[0] != nil || got[1] != nil {
				t.Fatalf("round %d: identical acks on m%d and m%d: %v / %v, want both to succeed", round, p[0], p[1], got[0], got[1])
			}
			continue
		}
		if (got[0] == nil) == (got[1] == nil) {
			t.Fatalf("round %d: different acks on m%d and m%d: %v / %v, want exactly one to succeed", round, p[0], p[1], got[0], got[1])
		}
		loser := 0
		if got[0] == nil {
			loser = 1
		}
		onlyClass(t, fmt.Sprintf("round %d: the losing ack on m%d", round, p[loser]), got[loser], jobraft.ErrStaleLease)
		msg := got[loser].Error()
		if want := fmt.Sprintf("lease %d ended: acked", token); !strings.Contains(msg, want) {
			t.Fatalf("round %d: the losing ack's error %q does not say %q", round, msg, want)
		}
		for _, r := range results {
			if strings.Contains(msg, r) {
				t.Fatalf("round %d: the losing ack's error %q quotes a result", round, msg)
			}
		}
		t.Logf("round %d: m%d won; m%d: %v", round, p[1-loser], p[loser], got[loser])
	}
}

// A worker's ack whose first attempt's outcome is unknown (its leader was
// isolated after appending it; the entry never commits) while a second
// worker, holding the same lease, acks it with another result through the
// majority: the first worker's retry is refused stale, and the resolution
// by a linearizable read must not call it a success because the lease
// ended "acked" under its token: the job's LastLease is this lease's, but
// the request that ended it is not this one (Job.EndedBy). The first
// worker gets ErrStaleLease, and only that. (The resolver used to check the
// kind of end alone and told this worker its result was recorded.)
func TestUnknownAckLosingToAnotherAckIsStale(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) { patientLeader(cfg) })
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, 3*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "two", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.Ctls[l].Claim(ctx, jobraft.ClaimRequest{Queues: []string{"two"}, Worker: "w1", LeaseTTL: time.Hour})
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	w1 := ls[0]
	before := c.Ctls[l].Node().Status().LastIndex

	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	ackErr := make(chan error, 1)
	go func() { ackErr <- w1.Ack(ctx, []byte("from-w1")) }()
	clustertest.WaitFor(t, wait, "the isolated leader to step down", func() bool {
		return c.Ctls[l].Node().Status().Role != "Leader"
	})
	appended := holdsAck(t, c.Ctls[l], before, w1.Token)

	n := leaderOf(t, c, l)
	w2 := c.Ctls[n].LeaseOf(jobraft.Job{ID: j.ID}, w1.Token)
	if err := w2.Ack(ctx, []byte("from-w2")); err != nil {
		t.Fatalf("the second worker's ack through the majority: %v", err)
	}
	fn.Rejoin(addr)
	select {
	case err := <-ackErr:
		if err == nil {
			t.Fatal("the first worker's ack was reported successful; the lease was acked by the second worker's, with another result")
		}
		onlyClass(t, fmt.Sprintf("the first worker's ack (first attempt appended: %v)", appended), err, jobraft.ErrStaleLease)
		if want := fmt.Sprintf("lease %d ended: acked", w1.Token); !strings.Contains(err.Error(), want) {
			t.Fatalf("ack: %v, want it to say %q", err, want)
		}
		t.Logf("first attempt appended: %v; ack: %v", appended, err)
	case <-ctx.Done():
		t.Fatal("the first worker's ack did not return")
	}
	got, err := c.Ctls[n].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StateSucceeded || string(got.Result) != "from-w2" {
		t.Fatalf("job %+v %v: want succeeded with the second worker's result", got, err)
	}
}

// A nak repeated after the job's next lease ended is stale (the contract:
// a repeat succeeds only while its lease is the last of the job that
// ended), also when the call's first attempt is unknown: a follower
// forwards it, the leader applies it (refused stale, nothing changes) and
// its answer is lost; the retry is refused stale, and the resolution by a
// linearizable read must not count the earlier, identical nak that ended
// the lease, before this call, as this call's attempt. The answer is
// ErrStaleLease or ErrOutcomeUnknown, never success. (The resolver took
// the event history's "the lease ended by a nak with this request sum" as
// proof that the unknown attempt applied: chaos seeds 13 and 26 answered a
// client's nak OK long after a later lease of its job was acked, which
// porcupine refused.)
func TestUnknownNakRepeatAfterALaterLeaseEndedIsNotSuccess(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := clustertest.StartCtlsWithFaults(t, 3, fn, nil)
	l := c.WaitLeader(wait)
	f := c.Follower()
	ctx := clustertest.Ctx(t, 2*wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "again", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, c.Ctls[l], "again", 0)
	if err := first.Nak(ctx, time.Nanosecond, "boom"); err != nil {
		t.Fatal(err)
	}
	second := claimOne(t, c.Ctls[l], "again", 5*time.Second)
	if err := second.Ack(ctx, []byte("done")); err != nil {
		t.Fatal(err)
	}
	// The follower applied the ack: its own read of the job, and the
	// history its resolver reads, show both ends.
	clustertest.WaitFor(t, wait, "the ack applied on the follower", func() bool {
		g, err := c.Ctls[f].Get(ctx, j.ID, jobraft.Local)
		return err == nil && g.State == jobraft.StateSucceeded
	})

	from, to := hraft.ServerAddress(c.Cfgs[f].BindAddr), hraft.ServerAddress(c.Cfgs[l].BindAddr)
	lost := fn.StatsFrom(from)[faultnet.KindCall].Lost
	fn.LoseCallResponses(from, to, "jr.propose", 1)
	err = c.Ctls[f].LeaseOf(jobraft.Job{ID: j.ID}, first.Token).Nak(ctx, time.Nanosecond, "boom")
	if got := fn.StatsFrom(from)[faultnet.KindCall].Lost - lost; got != 1 {
		t.Fatalf("%d forwarded answers lost, want 1: the first attempt was not unknown (nak: %v)", got, err)
	}
	if err == nil {
		t.Fatalf("the nak of lease %d, repeated after lease %d was acked, was reported successful", first.Token, second.Token)
	}
	if cl := classesOf(err); len(cl) != 1 || (cl[0] != jobraft.ErrStaleLease && cl[0] != jobraft.ErrOutcomeUnknown) {
		t.Fatalf("nak: %v matches %v, want only ErrStaleLease or only ErrOutcomeUnknown", err, cl)
	}
	t.Logf("nak: %v", err)
	got, err := c.Ctls[l].Get(ctx, j.ID, jobraft.Linearizable)
	if err != nil || got.State != jobraft.StateSucceeded || got.LastLease == nil || got.LastLease.Token != second.Token {
		t.Fatalf("job %+v %v: want succeeded, its last lease %d", got, err, second.Token)
	}
}
