package main

import (
	"math"
	"net/http"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// Cluster-wide limits (jobraft's limits.go):
//
//	POST   /v1/queues/{queue}/limit {"max": N, "kind": "K"}  set a concurrency limit
//	DELETE /v1/queues/{queue}/limit[?kind=K]                 clear it
//	POST   /v1/queues/{queue}/rate {"per_second": R, "burst": B}
//	DELETE /v1/queues/{queue}/rate
//	GET    /v1/limits                                        every queue's limits
//
// Each change is idempotent and answers the queue's limits after it. A limit of 0 or beyond 2^32-1, a rate not
// above 0 (or so high a token would come in under a nanosecond), a burst
// out of range and a bad queue or kind name are refused with 400 and
// change nothing.

func (s *server) setLimit(w http.ResponseWriter, r *http.Request) error {
	q, err := pathQueue(r)
	if err != nil {
		return err
	}
	var in client.LimitRequest
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.Max < 1 || in.Max > math.MaxUint32 {
		return bad("max %d out of [1, %d]: a limit of 0 is refused (DELETE the limit to clear it)", in.Max, uint32(math.MaxUint32))
	}
	if err := checkKind(in.Kind); err != nil {
		return err
	}
	if err := s.ctl.SetLimit(r.Context(), q, in.Kind, int(in.Max)); err != nil {
		return err
	}
	return s.writeLimits(w, r, q)
}

func (s *server) clearLimit(w http.ResponseWriter, r *http.Request) error {
	q, err := pathQueue(r)
	if err != nil {
		return err
	}
	kind := r.URL.Query().Get("kind")
	if err := checkKind(kind); err != nil {
		return err
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.ctl.ClearLimit(r.Context(), q, kind); err != nil {
		return err
	}
	return s.writeLimits(w, r, q)
}

func (s *server) setRate(w http.ResponseWriter, r *http.Request) error {
	q, err := pathQueue(r)
	if err != nil {
		return err
	}
	var in client.RateRequest
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if !(in.PerSecond > 0) || math.IsInf(in.PerSecond, 0) {
		return bad("per_second %v: a rate must be above 0", in.PerSecond)
	}
	if in.Burst < 0 || in.Burst > fsm.MaxRateBurst {
		return bad("burst %d out of [0, %d] (0: 1)", in.Burst, fsm.MaxRateBurst)
	}
	if err := s.ctl.SetRate(r.Context(), q, jobraft.RateLimit{PerSecond: in.PerSecond, Burst: in.Burst}); err != nil {
		return err
	}
	return s.writeLimits(w, r, q)
}

func (s *server) clearRate(w http.ResponseWriter, r *http.Request) error {
	q, err := pathQueue(r)
	if err != nil {
		return err
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.ctl.ClearRate(r.Context(), q); err != nil {
		return err
	}
	return s.writeLimits(w, r, q)
}

// GET /v1/limits (linearizable).
func (s *server) limits(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.ctl.Limits(r.Context(), jobraft.Linearizable)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, client.LimitsReply{Limits: limitsOf(ls)})
	return nil
}

// writeLimits answers queue's limits after a change that succeeded, read
// linearizably (a follower may not have applied it yet): {"queue": q}
// alone when it has none, with "unread" when the read failed.
func (s *server) writeLimits(w http.ResponseWriter, r *http.Request, queue string) error {
	out := client.QueueLimits{Queue: queue}
	ls, err := s.ctl.Limits(r.Context(), jobraft.Linearizable)
	if err != nil {
		out.Unread = true
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	for _, l := range limitsOf(ls) {
		if l.Queue == queue {
			out = l
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func checkKind(kind string) error {
	if len(kind) > fsm.MaxNameLen {
		return bad("kind of %d bytes (max %d)", len(kind), fsm.MaxNameLen)
	}
	return nil
}

// limitsOf is the wire form of the controller's limits.
func limitsOf(ls []jobraft.QueueLimits) []client.QueueLimits {
	out := make([]client.QueueLimits, 0, len(ls))
	for _, l := range ls {
		c := client.QueueLimits{Queue: l.Queue, Max: l.Max, Running: l.Running, Limited: l.Limited, RateLimited: l.RateLimited}
		for _, k := range l.Kinds {
			c.Kinds = append(c.Kinds, client.KindLimit{Kind: k.Kind, Max: k.Max, Running: k.Running})
		}
		if rt := l.Rate; rt != nil {
			c.Rate = &client.Rate{PerSecond: float64(time.Second) / float64(rt.Every), Every: client.Duration(rt.Every), Burst: rt.Burst, Tokens: rt.Tokens}
		}
		out = append(out, c)
	}
	return out
}

// uniqueOf is a submit's unique options, checked (nil when none).
func uniqueOf(u *client.UniqueOpts) (*jobraft.UniqueOpts, error) {
	if u == nil {
		return nil, nil
	}
	if u.Period < 0 || time.Duration(u.Period) > fsm.MaxDelay {
		return nil, bad("unique period out of [0, %v]", fsm.MaxDelay)
	}
	out := &jobraft.UniqueOpts{Period: time.Duration(u.Period)}
	for _, name := range u.States {
		st, err := parseState(name)
		if err != nil {
			return nil, bad("unique states: %v", err)
		}
		out.States |= fsm.StatesOf(st)
	}
	return out, nil
}

// uniqueJSON is a job's unique key on the wire (nil when it has none).
func uniqueJSON(u *fsm.Unique) *client.Unique {
	if u == nil {
		return nil
	}
	out := &client.Unique{Period: client.Duration(u.Period), Held: u.Held}
	for _, st := range u.States.States() {
		out.States = append(out.States, st.String())
	}
	if !u.Window.IsZero() {
		t := u.Window
		out.Window = &t
	}
	return out
}
