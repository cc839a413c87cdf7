package clustertest

import (
	"context"
	"errors"

	"github.com/jobraft/jobraft"
)

// BatchView is a batch as the member API reports it.
type BatchView struct {
	ID        string `json:"id"`
	Members   int    `json:"members"`
	Done      bool   `json:"done"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
}

// depRoutes adds POST /create-batch and /get-batch to the member API.
func depRoutes(ctl *jobraft.Controller, handle func(string, func(context.Context, Request) Reply), classify func(error) Reply) {
	handle("/create-batch", func(ctx context.Context, r Request) Reply {
		req := jobraft.BatchRequest{ID: r.Batch, Jobs: make([]jobraft.SubmitRequest, len(r.Payloads)),
			Completion: &jobraft.SubmitRequest{ID: r.ID, Queue: r.Queue + "-done", Kind: "k", Payload: []byte(r.Payload)}}
		for i, p := range r.Payloads {
			req.Jobs[i] = jobraft.SubmitRequest{ID: r.IDs[i], Queue: r.Queue, Kind: "k", Payload: []byte(p), MaxAttempts: r.MaxAttempts}
			if i < len(r.Afters) {
				req.Jobs[i].After = r.Afters[i]
			}
		}
		res, err := ctl.CreateBatch(ctx, req)
		rep := classify(err)
		for _, sr := range res.Jobs {
			rep.Outcomes = append(rep.Outcomes, classify(sr.Err).Outcome)
		}
		return rep
	})
	handle("/get-batch", func(ctx context.Context, r Request) Reply {
		b, err := ctl.Batch(ctx, r.Batch, r.consistency())
		if errors.Is(err, jobraft.ErrNotFound) {
			return Reply{Outcome: OutcomeOK}
		}
		if err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		return Reply{Outcome: OutcomeOK, Batch: &BatchView{ID: b.ID, Members: b.Members, Done: b.Done, Succeeded: b.Counts.Succeeded, Failed: b.Failed()}}
	})
}
