package clustertest

import (
	"context"
	"time"

	"github.com/jobraft/jobraft"
)

// UniqueView is a unique job's key as the member API reports it: the
// start of its period window, its chosen states and whether it holds it.
type UniqueView struct {
	Window time.Time `json:"window,omitzero"`
	States string    `json:"states"`
	Held   bool      `json:"held"`
}

// limitRoutes adds the routes of limits and unique jobs to the member API:
// POST /limit sets Queue's concurrency limit (Kind's, when set) to Max;
// /lclaim claims up to Max jobs of Queue (no wait); /usubmit submits a
// job of Kind to Queue, unique by its payload within Period (states: the
// default); /ksubmit submits a job of Kind to Queue.
func limitRoutes(ctl *jobraft.Controller, handle func(string, func(context.Context, Request) Reply), classify func(error) Reply) {
	handle("/limit", func(ctx context.Context, r Request) Reply {
		return classify(ctl.SetLimit(ctx, r.Queue, r.Kind, r.Max))
	})
	handle("/lclaim", func(ctx context.Context, r Request) Reply {
		ls, err := ctl.Claim(ctx, jobraft.ClaimRequest{Queues: []string{r.Queue}, Worker: r.Worker, LeaseTTL: r.TTL, Max: r.Max})
		rep := classify(err)
		for _, l := range ls {
			rep.Jobs = append(rep.Jobs, *view(l.Job))
		}
		return rep
	})
	handle("/ksubmit", func(ctx context.Context, r Request) Reply {
		j, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: r.Queue, Kind: r.Kind, Payload: []byte(r.Payload), MaxAttempts: r.MaxAttempts})
		rep := classify(err)
		if err == nil {
			rep.Job = view(j.Job)
		}
		return rep
	})
	handle("/usubmit", func(ctx context.Context, r Request) Reply {
		j, err := ctl.Submit(ctx, jobraft.SubmitRequest{ID: r.ID, Queue: r.Queue, Kind: r.Kind, Payload: []byte(r.Payload),
			Unique: &jobraft.UniqueOpts{Period: r.Period}})
		rep := classify(err)
		if err == nil {
			rep.Job = view(j.Job)
			rep.Duplicate = j.Duplicate
		}
		return rep
	})
}
