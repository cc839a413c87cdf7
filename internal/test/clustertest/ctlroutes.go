package clustertest

import (
	"context"
	"errors"
	"time"

	"github.com/jobraft/jobraft"
)

// EventView is a watch event as the member API reports it.
type EventView struct {
	Index uint64 `json:"index"`
	Kind  string `json:"kind"`
	Job   string `json:"job,omitempty"`
	Token uint64 `json:"token,omitempty"`
}

// moreRoutes adds POST /batch, /extend, /cancel, /watch, /transfer, /add
// and /remove to the member API.
func moreRoutes(ctl *jobraft.Controller, handle func(string, func(context.Context, Request) Reply), classify func(error) Reply) {
	handle("/batch", func(ctx context.Context, r Request) Reply {
		reqs := make([]jobraft.SubmitRequest, len(r.Payloads))
		for i, p := range r.Payloads {
			reqs[i] = jobraft.SubmitRequest{Queue: r.Queue, Kind: "k", Payload: []byte(p), MaxAttempts: r.MaxAttempts}
		}
		res, err := ctl.SubmitBatch(ctx, reqs)
		rep := classify(err)
		for _, sr := range res {
			rep.Outcomes = append(rep.Outcomes, classify(sr.Err).Outcome)
		}
		return rep
	})
	handle("/extend", func(ctx context.Context, r Request) Reply {
		return classify(ctl.LeaseOf(jobraft.Job{ID: r.ID}, r.Token).Extend(ctx))
	})
	handle("/cancel", func(ctx context.Context, r Request) Reply {
		j, err := ctl.Cancel(ctx, r.ID, "chaos")
		rep := classify(err)
		if err == nil {
			rep.Job = view(j)
		}
		return rep
	})
	handle("/watch", func(ctx context.Context, r Request) Reply {
		wctx, cancel := context.WithTimeout(ctx, r.Wait)
		defer cancel()
		ch, err := ctl.Watch(wctx, r.From, jobraft.WatchFilter{Queues: []string{r.Queue}})
		if err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		rep := Reply{Outcome: OutcomeOK}
		for ev := range ch {
			if ev.Kind == jobraft.EventError {
				if !errors.Is(ev.Err, context.DeadlineExceeded) && !errors.Is(ev.Err, context.Canceled) {
					rep.Outcome, rep.Error = OutcomeError, ev.Err.Error()
				}
				continue
			}
			rep.Events = append(rep.Events, EventView{Index: ev.Index, Kind: string(ev.Kind), Job: ev.JobID, Token: ev.Token})
		}
		return rep
	})
	// /add adds member ID at Addr (raft.Node.AddMember: a non-voter, then
	// a voter once the catch-up policy promotes it); /remove removes ID.
	// Either may be sent to any member; ok means the change completed.
	handle("/add", func(ctx context.Context, r Request) Reply {
		if err := ctl.Node().AddMember(ctx, r.ID, r.Addr); err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		return Reply{Outcome: OutcomeOK}
	})
	handle("/remove", func(ctx context.Context, r Request) Reply {
		if err := ctl.Node().RemoveMember(ctx, r.ID); err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		return Reply{Outcome: OutcomeOK}
	})
	handle("/transfer", func(ctx context.Context, r Request) Reply {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := ctl.Node().TransferLeadership(tctx, r.ID); err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		return Reply{Outcome: OutcomeOK}
	})
}
