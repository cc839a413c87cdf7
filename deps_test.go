package jobraft_test

import (
	"errors"
	"testing"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// A waiting dependent's end by its parent's failure reaches Wait and a
// batch's watch (the events of a cascade); a batch created twice by the
// same request is answered as created, by another request ErrBatchExists;
// an unknown parent is not submitted.
func TestDependentsAndBatchesThroughTheController(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	l := c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)
	f := (l + 1) % 3
	_, err := c.Ctls[f].Submit(ctx, jobraft.SubmitRequest{ID: "x", Queue: "q", Kind: "k", After: []string{"nope"}})
	if !errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, jobraft.ErrInvalidRequest) || !errors.Is(err, fsm.ErrUnknownParent) {
		t.Fatalf("unknown parent: %v", err)
	}
	events, err := c.Ctls[f].Watch(ctx, 0, jobraft.WatchFilter{Batch: "b"})
	if err != nil {
		t.Fatal(err)
	}
	req := jobraft.BatchRequest{ID: "b", Jobs: []jobraft.SubmitRequest{{ID: "p", Queue: "q", Kind: "k"}, {ID: "d", Queue: "q", Kind: "k", After: []string{"p"}}},
		Completion: &jobraft.SubmitRequest{ID: "done", Queue: "r", Kind: "k"}}
	res, err := c.Ctls[f].CreateBatch(ctx, req)
	if err != nil || res.Batch.Members != 2 || res.Jobs[1].Job.State != jobraft.StateWaiting {
		t.Fatalf("create: %v %+v", err, res)
	}
	if again, err := c.Ctls[l].CreateBatch(ctx, req); err != nil || again.Batch.Sum != res.Batch.Sum || again.Jobs[1].Err != nil {
		t.Fatalf("the same request again: %v %+v", err, again)
	}
	other := req
	other.Jobs = req.Jobs[:1]
	if _, err := c.Ctls[l].CreateBatch(ctx, other); !errors.Is(err, jobraft.ErrBatchExists) {
		t.Fatalf("another request, same ID: %v", err)
	}
	waited := make(chan jobraft.Job, 1)
	go func() {
		j, _ := c.Ctls[f].Wait(ctx, "d")
		waited <- j
	}()
	if _, err := c.Ctls[l].Cancel(ctx, "p", "stop"); err != nil {
		t.Fatal(err)
	}
	if j := <-waited; j.State != jobraft.StateCanceled || j.LastError != `parent "p" ended canceled` {
		t.Fatalf("Wait(d) = %+v", j)
	}
	var kinds []jobraft.EventKind
	for ev := range events {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == jobraft.EventBatchCompleted {
			if ev.Succeeded != 0 || ev.Failed != 2 {
				t.Fatalf("batch-completed %+v", ev)
			}
			break
		}
	}
	want := []jobraft.EventKind{jobraft.EventSubmitted, jobraft.EventSubmitted, jobraft.EventCanceled, jobraft.EventParentFailed, jobraft.EventBatchCompleted}
	if len(kinds) != len(want) {
		t.Fatalf("batch events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("batch events %v, want %v", kinds, want)
		}
	}
	if j, err := c.Ctls[f].Get(ctx, "done", jobraft.Linearizable); err != nil || j.State != jobraft.StatePending {
		t.Fatalf("completion job: %v %+v", err, j)
	}
}
