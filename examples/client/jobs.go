package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Submit submits one job, resubmitting it with the same ID after an
// unknown outcome until the outcome is known or ctx ends (then
// ErrOutcomeUnknown: the job exists at most once; submit again with the
// same ID to learn whether).
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (Submitted, error) {
	if req.ID == "" {
		req.ID = NewID()
	}
	retried := false
	backoff := c.cfg.Backoff
	for {
		var out Submitted
		cl := &call{method: "POST", path: "/v1/jobs", in: req, out: &out, mutates: true}
		err := c.do(ctx, cl)
		if err == nil {
			out.Retried = retried
			return out, nil
		}
		if !errors.Is(err, ErrOutcomeUnknown) || ctx.Err() != nil {
			return Submitted{}, err
		}
		retried = true
		if err := sleep(ctx, backoff); err != nil {
			return Submitted{}, fmt.Errorf("%w (resubmit job %q to learn its outcome)", errors.Join(err, ErrOutcomeUnknown), req.ID)
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// resubmit are the per-job errors of a batch after which SubmitBatch
// resubmits the job (with its ID, so at most once): not created, or
// unknown.
var resubmit = map[string]bool{"outcome_unknown": true, "not_submitted": true, "not_applied": true, "closed": true, "timeout": true}

// SubmitBatch submits up to 1000 jobs; each result carries its own
// outcome (Error, Reason). Jobs not submitted or whose outcome is unknown
// are resubmitted, with the same IDs, until known or ctx ends.
func (c *Client) SubmitBatch(ctx context.Context, reqs []SubmitRequest) ([]Submitted, error) {
	reqs = append([]SubmitRequest(nil), reqs...)
	for i := range reqs {
		if reqs[i].ID == "" {
			reqs[i].ID = NewID()
		}
	}
	out := make([]Submitted, len(reqs))
	todo := make([]int, len(reqs))
	for i := range todo {
		todo[i] = i
	}
	backoff := c.cfg.Backoff
	for round := 0; ; round++ {
		batch := make([]SubmitRequest, len(todo))
		for k, i := range todo {
			batch[k] = reqs[i]
		}
		var reply BatchReply
		err := c.do(ctx, &call{method: "POST", path: "/v1/jobs/batch", in: BatchRequest{Jobs: batch}, out: &reply, mutates: true})
		var again []int
		switch {
		case err == nil && len(reply.Results) == len(todo):
			for k, i := range todo {
				r := reply.Results[k]
				r.Retried = round > 0
				out[i] = r
				if resubmit[r.Error] {
					again = append(again, i)
				}
			}
		case err == nil:
			return out, fmt.Errorf("jobd: batch reply has %d results for %d jobs", len(reply.Results), len(todo))
		case errors.Is(err, ErrOutcomeUnknown):
			again = todo
		default:
			return out, err
		}
		if len(again) == 0 {
			return out, nil
		}
		todo = again
		if err := sleep(ctx, backoff); err != nil {
			return out, errors.Join(err, ErrOutcomeUnknown)
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Consistency of a read: "" (linearizable, the default) or "local".
type Consistency string

// Read consistencies.
const (
	Linearizable Consistency = ""
	Local        Consistency = "local"
)

// Get returns a job (ErrNotFound if there is none).
func (c *Client) Get(ctx context.Context, id string, cons Consistency) (Job, error) {
	var j Job
	path := "/v1/jobs/" + url.PathEscape(id)
	if cons != "" {
		path += "?consistency=" + url.QueryEscape(string(cons))
	}
	err := c.do(ctx, &call{method: "GET", path: path, out: &j})
	return j, err
}

// ListRequest selects one page of a queue's jobs.
type ListRequest struct {
	Queue       string
	State       string // "" for every state
	Cursor      string
	Limit       int // 0: jobd's default
	Consistency Consistency
}

// List returns one page of a queue's jobs (of every queue, queue by
// queue in name order, when Queue is empty).
func (c *Client) List(ctx context.Context, r ListRequest) (JobPage, error) {
	q := url.Values{"queue": {r.Queue}}
	if r.State != "" {
		q.Set("state", r.State)
	}
	if r.Cursor != "" {
		q.Set("cursor", r.Cursor)
	}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	if r.Consistency != "" {
		q.Set("consistency", string(r.Consistency))
	}
	var p JobPage
	err := c.do(ctx, &call{method: "GET", path: "/v1/jobs?" + q.Encode(), out: &p})
	return p, err
}

// ListAll pages through every job of a queue (of every queue when queue
// is empty), in one state or all.
func (c *Client) ListAll(ctx context.Context, queue, state string) ([]Job, error) {
	var all []Job
	r := ListRequest{Queue: queue, State: state, Limit: 1000}
	for {
		p, err := c.List(ctx, r)
		if err != nil {
			return all, err
		}
		all = append(all, p.Jobs...)
		if p.Next == "" {
			return all, nil
		}
		r.Cursor = p.Next
	}
}

// Cancel cancels a job, resending after an unknown outcome; a resend
// refused because the job is canceled already returns the canceled job.
func (c *Client) Cancel(ctx context.Context, id, reason string) (Job, error) {
	var j Job
	path := "/v1/jobs/" + url.PathEscape(id) + "/cancel"
	err := c.resend(ctx, &call{method: "POST", path: path, in: CancelRequest{Reason: reason}, out: &j, mutates: true},
		func() (bool, error) {
			got, err := c.Get(ctx, id, Linearizable)
			if err == nil && got.State == "canceled" {
				j = got
				return true, nil
			}
			return false, err
		})
	return j, err
}

// Retry moves a dead or canceled job back to pending. It is never resent:
// after an unknown outcome it reads the job and returns it if it left
// dead/canceled, else ErrOutcomeUnknown (the retry may still apply).
func (c *Client) Retry(ctx context.Context, id string) (Job, error) {
	var j Job
	err := c.do(ctx, &call{method: "POST", path: "/v1/jobs/" + url.PathEscape(id) + "/retry", out: &j, mutates: true})
	if !errors.Is(err, ErrOutcomeUnknown) {
		return j, err
	}
	got, gerr := c.Get(ctx, id, Linearizable)
	if gerr == nil && got.State != "dead" && got.State != "canceled" {
		return got, nil
	}
	return j, err
}

// resend sends cl; after an unknown outcome it resends until known or ctx
// ends. A resend refused (ErrRefused) is given to settled, which reports
// whether the first attempt's effect is visible (then nil is returned).
// Any other answer to a resend that is not a success (a refusal without
// settled, a not-found: what the first attempt may have caused) is joined
// with ErrOutcomeUnknown: the first attempt may have taken effect.
func (c *Client) resend(ctx context.Context, cl *call, settled func() (bool, error)) error {
	unknown := false
	backoff := c.cfg.Backoff
	for {
		err := c.do(ctx, cl)
		switch {
		case err == nil:
			return nil
		case unknown && errors.Is(err, ErrRefused) && settled != nil:
			if ok, serr := settled(); serr == nil && ok {
				return nil
			}
			return errors.Join(err, ErrOutcomeUnknown)
		case unknown && !errors.Is(err, ErrOutcomeUnknown):
			return errors.Join(err, ErrOutcomeUnknown)
		case !errors.Is(err, ErrOutcomeUnknown) || ctx.Err() != nil:
			return err
		}
		unknown = true
		if serr := sleep(ctx, backoff); serr != nil {
			return errors.Join(err, serr)
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Pause stops claims from a queue (submits are still accepted); Resume
// undoes it. Both are idempotent, and resent after an unknown outcome.
func (c *Client) Pause(ctx context.Context, queue string) error {
	return c.resend(ctx, &call{method: "POST", path: "/v1/queues/" + url.PathEscape(queue) + "/pause", mutates: true}, nil)
}

// Resume restarts claims from a paused queue.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.resend(ctx, &call{method: "POST", path: "/v1/queues/" + url.PathEscape(queue) + "/resume", mutates: true}, nil)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SetLimit sets the concurrency limit of queue (kind "") or of one kind
// of it: at most max of its jobs run at once, across the cluster.
// Idempotent, resent after an unknown outcome. The reply is the queue's
// limits after it.
func (c *Client) SetLimit(ctx context.Context, queue, kind string, max int64) (QueueLimits, error) {
	var out QueueLimits
	err := c.resend(ctx, &call{method: "POST", path: limitPath(queue, "limit"), in: LimitRequest{Kind: kind, Max: max}, out: &out, mutates: true}, nil)
	return out, err
}

// ClearLimit removes the concurrency limit of queue (kind "") or of one
// kind of it (clearing none succeeds).
func (c *Client) ClearLimit(ctx context.Context, queue, kind string) (QueueLimits, error) {
	var out QueueLimits
	path := limitPath(queue, "limit")
	if kind != "" {
		path += "?kind=" + url.QueryEscape(kind)
	}
	err := c.resend(ctx, &call{method: "DELETE", path: path, out: &out, mutates: true}, nil)
	return out, err
}

// SetRate sets queue's rate: perSecond jobs a second, bursts of burst.
func (c *Client) SetRate(ctx context.Context, queue string, perSecond float64, burst int) (QueueLimits, error) {
	var out QueueLimits
	err := c.resend(ctx, &call{method: "POST", path: limitPath(queue, "rate"), in: RateRequest{PerSecond: perSecond, Burst: burst}, out: &out, mutates: true}, nil)
	return out, err
}

// ClearRate removes queue's rate (clearing none succeeds).
func (c *Client) ClearRate(ctx context.Context, queue string) (QueueLimits, error) {
	var out QueueLimits
	err := c.resend(ctx, &call{method: "DELETE", path: limitPath(queue, "rate"), out: &out, mutates: true}, nil)
	return out, err
}

// Limits returns every queue's limits (linearizable).
func (c *Client) Limits(ctx context.Context) ([]QueueLimits, error) {
	var out LimitsReply
	err := c.do(ctx, &call{method: "GET", path: "/v1/limits", out: &out})
	return out.Limits, err
}

func limitPath(queue, what string) string { return "/v1/queues/" + url.PathEscape(queue) + "/" + what }
