package main

import (
	"context"
	"net/http"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// submitJSON is one job to submit: the client's request, whose payload
// jobd also accepts as text (payload_text; give payload, base64, or
// payload_text, not both).
type submitJSON struct {
	client.SubmitRequest
	PayloadText *string `json:"payload_text"`
}

func (j *submitJSON) request(now time.Time) (jobraft.SubmitRequest, error) {
	if j.ID != "" {
		if err := checkJobID(j.ID); err != nil {
			return jobraft.SubmitRequest{}, err
		}
	}
	if j.Queue == "" || j.Kind == "" {
		return jobraft.SubmitRequest{}, bad("queue and kind are required")
	}
	if j.PayloadText != nil && j.Payload != nil {
		return jobraft.SubmitRequest{}, bad("give payload (base64) or payload_text, not both")
	}
	if j.Delay < 0 || time.Duration(j.Delay) > fsm.MaxDelay {
		return jobraft.SubmitRequest{}, bad("delay out of [0, %v]", fsm.MaxDelay)
	}
	if j.RunAt != nil && j.Delay != 0 {
		return jobraft.SubmitRequest{}, bad("give delay or run_at, not both")
	}
	if j.RunAt != nil && j.RunAt.Sub(now) > fsm.MaxDelay {
		return jobraft.SubmitRequest{}, bad("run_at %s is more than %v ahead", j.RunAt.Format(time.RFC3339), fsm.MaxDelay)
	}
	after, policy, err := parents(&j.SubmitRequest)
	if err != nil {
		return jobraft.SubmitRequest{}, err
	}
	req := jobraft.SubmitRequest{ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority,
		Delay: time.Duration(j.Delay), MaxAttempts: j.MaxAttempts, IdempotencyKey: j.IdempotencyKey, After: after, OnParentFailure: policy}
	if j.PayloadText != nil {
		req.Payload = []byte(*j.PayloadText)
	}
	u, err := uniqueOf(j.Unique) // api_limits.go
	if err != nil {
		return jobraft.SubmitRequest{}, err
	}
	req.Unique = u
	if j.RunAt != nil {
		req.RunAt = *j.RunAt
	}
	return req, nil
}

// POST /v1/jobs: 201 created, 200 duplicate (the existing job).
func (s *server) submit(w http.ResponseWriter, r *http.Request) error {
	var in submitJSON
	if err := decode(r, &in, false); err != nil {
		return err
	}
	req, err := in.request(time.Now())
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := s.ctl.SubmitBatch(r.Context(), []jobraft.SubmitRequest{req})
	s.observeSubmit(start, err)
	if err != nil {
		return err
	}
	code := http.StatusCreated
	if res[0].Duplicate {
		code = http.StatusOK
	}
	writeJSON(w, code, client.Submitted{Job: jobOf(res[0].Job), Duplicate: res[0].Duplicate})
	return nil
}

func (s *server) observeSubmit(start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.m.submit.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

const maxBatch = 1000

// POST /v1/jobs/batch {"jobs": [...]}: each job has its own outcome; 200
// when all succeeded, else 207 with per-job errors. A malformed request
// (any job failing the HTTP-level checks) is refused whole with 400.
func (s *server) submitBatch(w http.ResponseWriter, r *http.Request) error {
	var in struct { // client.BatchRequest, each job decoded as submitJSON
		Jobs []submitJSON `json:"jobs"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if len(in.Jobs) == 0 || len(in.Jobs) > maxBatch {
		return bad("jobs: 1..%d jobs per batch, got %d", maxBatch, len(in.Jobs))
	}
	reqs := make([]jobraft.SubmitRequest, len(in.Jobs))
	now := time.Now()
	for i := range in.Jobs {
		var err error
		if reqs[i], err = in.Jobs[i].request(now); err != nil {
			return bad("jobs[%d]: %v", i, err)
		}
	}
	start := time.Now()
	res, err := s.ctl.SubmitBatch(r.Context(), reqs)
	s.observeSubmit(start, err)
	out := make([]client.Submitted, len(res))
	for i, x := range res {
		out[i] = client.Submitted{Job: jobOf(x.Job), Duplicate: x.Duplicate}
		if x.Err != nil {
			_, out[i].Error, out[i].Reason = classify(x.Err, adviceSubmit)
			out[i].Reason = nameLeaders(out[i].Reason, s.ctl.Node().Status().Members)
		}
	}
	code := http.StatusOK
	if err != nil {
		code = http.StatusMultiStatus
	}
	writeJSON(w, code, client.BatchReply{Results: out})
	return nil
}

func consistency(r *http.Request) (jobraft.Consistency, error) {
	switch r.URL.Query().Get("consistency") {
	case "", "linearizable":
		return jobraft.Linearizable, nil
	case "local":
		return jobraft.Local, nil
	}
	return 0, bad("consistency must be linearizable or local")
}

// GET /v1/jobs/{id}
func (s *server) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	j, err := s.ctl.Get(r.Context(), id, cons)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobOf(j))
	return nil
}

func parseState(s string) (jobraft.State, error) {
	for st := jobraft.StatePending; st.Valid(); st++ {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, bad("unknown state %q (pending, scheduled, running, succeeded, dead, canceled, waiting)", s)
}

// GET /v1/stats
func (s *server) stats(w http.ResponseWriter, r *http.Request) error {
	st, err := s.ctl.Stats(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, statsOf(st, s.served.observe(st.Queues, time.Now())))
	return nil
}

// POST /v1/jobs/{id}/cancel {"reason": "..."}
func (s *server) cancel(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in client.CancelRequest
	if err := decode(r, &in, true); err != nil {
		return err
	}
	j, err := s.ctl.Cancel(r.Context(), id, in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobOf(j))
	return nil
}

// POST /v1/jobs/{id}/retry
func (s *server) retry(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	j, err := s.ctl.Retry(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobOf(j))
	return nil
}

// POST /v1/claim
func (s *server) claim(w http.ResponseWriter, r *http.Request) error {
	var in client.ClaimRequest // wait long-polls, at most 60s
	if err := decode(r, &in, false); err != nil {
		return err
	}
	switch {
	case len(in.Queues) == 0:
		return bad("queues: at least one queue")
	case in.Worker == "":
		return bad("worker is required")
	case in.Max < 0 || in.Max > fsm.MaxClaim:
		return bad("max must be 0..%d", fsm.MaxClaim)
	case in.LeaseTTL < 0 || time.Duration(in.LeaseTTL) > fsm.MaxLeaseTTL:
		return bad("lease_ttl out of [0, %v]", fsm.MaxLeaseTTL)
	case in.Wait < 0 || time.Duration(in.Wait) > time.Minute:
		return bad("wait out of [0, 60s]")
	}
	leases, err := s.ctl.Claim(r.Context(), jobraft.ClaimRequest{Queues: in.Queues, Worker: in.Worker, Max: in.Max,
		LeaseTTL: time.Duration(in.LeaseTTL), Wait: time.Duration(in.Wait)})
	if err != nil {
		return err
	}
	out := make([]client.Claimed, len(leases))
	for i, l := range leases {
		out[i] = claimedOf(l)
	}
	writeJSON(w, http.StatusOK, client.ClaimReply{Leases: out})
	return nil
}

// leaseReq is the body of ack, nak, extend and term: the client's
// request, whose result jobd also accepts as text (result_text; give
// result, base64, or result_text, not both).
type leaseReq struct {
	client.SettleRequest
	ResultText *string `json:"result_text"`
}

// lease rebuilds the lease of a job from its ID and token, once the body
// passed check. The job is read linearizably so the attempt number used to
// resolve unknown outcomes is current; the token alone carries the
// authority, checked by the state machine.
func (s *server) lease(ctx context.Context, r *http.Request, in *leaseReq, check func() error) (*jobraft.Lease, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if err := decode(r, in, false); err != nil {
		return nil, err
	}
	if in.Token == 0 {
		return nil, bad("token is required")
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	j, err := s.ctl.Get(ctx, id, jobraft.Linearizable)
	if err != nil {
		return nil, err
	}
	return s.ctl.LeaseOf(j, in.Token), nil
}

func (s *server) ack(w http.ResponseWriter, r *http.Request) error {
	var in leaseReq
	var res []byte
	l, err := s.lease(r.Context(), r, &in, func() error {
		res = in.Result
		if in.ResultText != nil {
			if res != nil {
				return bad("give result (base64) or result_text, not both")
			}
			res = []byte(*in.ResultText)
		}
		if len(res) > fsm.MaxResult {
			return bad("result of %d bytes is above %d", len(res), fsm.MaxResult)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, l, l.Ack(r.Context(), res), false)
}

func (s *server) nak(w http.ResponseWriter, r *http.Request) error {
	var in leaseReq
	l, err := s.lease(r.Context(), r, &in, func() error {
		if in.Delay < 0 || time.Duration(in.Delay) > fsm.MaxDelay {
			return bad("delay out of [0, %v]", fsm.MaxDelay)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, l, l.Nak(r.Context(), time.Duration(in.Delay), in.Error), false)
}

func (s *server) extend(w http.ResponseWriter, r *http.Request) error {
	var in leaseReq
	l, err := s.lease(r.Context(), r, &in, nil)
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, l, l.Extend(r.Context()), true)
}

func (s *server) term(w http.ResponseWriter, r *http.Request) error {
	var in leaseReq
	l, err := s.lease(r.Context(), r, &in, nil)
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, l, l.Term(r.Context(), in.Reason), false)
}

// leaseReply answers a lease operation that ended with err: on success,
// the job's state read after it (linearizable, so it shows the operation;
// when that read fails the reply still says the operation succeeded, with
// no state) and, when the lease goes on (extend), its new deadline. A
// repeat (the very request that ended the lease, answered again) gets the
// same truth: the state now, and no deadline of a lease that ended.
func (s *server) leaseReply(w http.ResponseWriter, r *http.Request, l *jobraft.Lease, err error, leaseGoesOn bool) error {
	if err != nil {
		return err
	}
	state := ""
	if j, err := s.ctl.Get(r.Context(), l.Job.ID, jobraft.Linearizable); err == nil {
		state = j.State.String()
	}
	writeJSON(w, http.StatusOK, settledOf(l, state, leaseGoesOn))
	return nil
}
