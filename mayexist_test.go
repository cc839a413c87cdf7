package jobraft_test

import (
	"context"
	"errors"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/ctltest"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// A submit whose context ends after a cut-off leader appended its entry
// (so the entry may still commit, as far as the caller can know) must
// report ErrMayExist, never ErrNotSubmitted ("it does not exist and never
// will"), with the job's ID in its *SubmitError. Resubmitting that ID after
// the partition heals finds at most one job.
func TestSubmitContextEndsAfterAppendIsMayExist(t *testing.T) {
	fn := faultnet.New(seed(t))
	c := ctltest.StartWithFaults(t, 3, fn, func(i int, cfg *jobraft.Config) {
		patientLeader(cfg)
	})
	l := c.WaitLeader(wait)
	before := c.Ctls[l].Node().Status().LastIndex

	addr := hraft.ServerAddress(c.Cfgs[l].BindAddr)
	fn.Isolate(addr)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Ctls[l].Submit(sctx, jobraft.SubmitRequest{ID: "maybe", Queue: "m", Kind: "k"})
		done <- err
	}()
	ctltest.WaitFor(t, wait, "the cut-off leader to append the submit", func() bool {
		return c.Ctls[l].Node().Status().LastIndex > before
	})
	cancel()
	err := <-done
	if errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, jobraft.ErrMayExist) {
		t.Fatalf("submit whose context ended after its entry was appended: %v; want ErrMayExist only", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("submit: %v: want the context's error as the cause", err)
	}
	var se *jobraft.SubmitError
	if !errors.As(err, &se) || se.ID != "maybe" || se.Class != jobraft.ErrMayExist {
		t.Fatalf("submit error %#v", se)
	}

	fn.Heal()
	ctx := ctltest.Ctx(t, wait)
	j, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{ID: se.ID, Queue: "m", Kind: "k"})
	if err != nil || j.ID != "maybe" {
		t.Fatalf("resubmit: %+v %v", j, err)
	}
	p, err := c.Ctls[l].List(ctx, jobraft.ListFilter{Queue: "m"}, jobraft.Page{})
	if err != nil || len(p.Jobs) != 1 {
		t.Fatalf("queue holds %d jobs (%v), want 1", len(p.Jobs), err)
	}
}
