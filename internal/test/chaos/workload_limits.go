package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// The limits workload: a queue with cluster-wide concurrency limits (the
// queue's and one kind's, drawn by the seed) that limit clients submit
// to, claim from (several jobs at once), hold and settle, some leases
// left to expire; and a queue of unique jobs (a few payloads, so most
// submits are duplicates) some of which are canceled, freeing their key.
// The limit and unique checkers (checks_limits.go) judge them.

// Limits workload sizes.
const (
	firstLimitClient = schedClient + 1
	limitClients     = 2
	uniqueClients    = 1
	limitQueue       = "lim"
	limitedKind      = "a" // the kind with its own limit; "b" has none
	uniqueQueue      = "uq"
	uniqueKeys       = 4 // payloads u0..u3
	// limitTTL is the limit queue's lease TTL: short enough that leases
	// left unsettled expire within a run (they count until the leader's
	// expiry ends them).
	limitTTL = 3 * time.Second
)

// limitPlan is a run's limits, drawn by the seed: the queue's limit and
// its kind a's, and the unique jobs' period.
type limitPlan struct {
	queueMax, kindMax int
	period            time.Duration
	// set is closed once both limits were acknowledged: limit clients
	// claim only then (the checker judges leases granted under them).
	set     chan struct{}
	setOnce sync.Once
	setAt   time.Duration // when the second limit's acknowledgement returned
}

func newLimitPlan(seed uint64) *limitPlan {
	rng := rand.New(rand.NewPCG(seed, 0x11a17))
	return &limitPlan{queueMax: 1 + rng.IntN(3), kindMax: 1, period: []time.Duration{0, 2 * time.Second}[rng.IntN(2)], set: make(chan struct{})}
}

// setLimits sets the plan's limits, each until acknowledged (or the
// workload stops), then releases the limit clients.
func (w *workload) setLimits(c int, rng *rand.Rand) {
	p := w.limits
	for _, lim := range []struct {
		kind string
		max  int
	}{{"", p.queueMax}, {limitedKind, p.kindMax}} {
		for !w.stopped() {
			req := clustertest.Request{Queue: limitQueue, Kind: lim.kind, Max: lim.max}
			_, op := w.call(c, rng, "limit", "/limit", req, Op{Detail: fmt.Sprintf("kind %q max %d", lim.kind, lim.max)})
			w.record(op)
			if op.Outcome == clustertest.OutcomeOK {
				p.setAt = op.Return
				break
			}
		}
	}
	if !w.stopped() {
		p.setOnce.Do(func() { close(p.set) })
	}
}

// limitClient submits jobs to the limit queue, claims up to three at
// once, and settles what it holds: acks most, naks some, and leaves some
// to expire (their settle later is stale). Ops: "lsubmit", "lclaim" (one
// per job leased, Job and Token set, Tags the job's kind), "lack",
// "lnak".
func (w *workload) limitClient(c int, rng *rand.Rand) {
	if c == firstLimitClient {
		w.setLimits(c, rng)
	}
	select {
	case <-w.limits.set:
	case <-w.stop:
		return
	}
	type held struct {
		id, kind string
		token    uint64
	}
	var hold []held
	for !w.stopped() {
		req := clustertest.Request{Queue: limitQueue, Worker: fmt.Sprintf("c%d", c), TTL: limitTTL, MaxAttempts: 10000}
		switch r := rng.IntN(10); {
		case r < 3:
			req.Kind = []string{limitedKind, "b"}[rng.IntN(2)]
			req.Payload = fmt.Sprintf("l%d-%d", c, rng.Uint32())
			_, op := w.call(c, rng, "lsubmit", "/ksubmit", req, Op{})
			w.record(op)
		case r < 6:
			req.Max = 1 + rng.IntN(3)
			rep, op := w.call(c, rng, "lclaim", "/lclaim", req, Op{})
			if op.Outcome != clustertest.OutcomeOK || len(rep.Jobs) == 0 {
				w.record(op)
				continue
			}
			for _, j := range rep.Jobs {
				one := op
				one.Job, one.Token, one.Tags = j.ID, j.Token, []string{j.Kind}
				w.record(one)
				hold = append(hold, held{j.ID, j.Kind, j.Token})
			}
		case len(hold) > 0:
			i := rng.IntN(len(hold))
			h := hold[i]
			hold = append(hold[:i], hold[i+1:]...)
			if rng.IntN(8) == 0 {
				// Left to expire: it is settled no more.
				time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
				continue
			}
			kind, path := "lack", "/ack"
			if rng.IntN(4) == 0 {
				kind, path = "lnak", "/nak"
			}
			req.ID, req.Token = h.id, h.token
			_, op := w.call(c, rng, kind, path, req, Op{Job: h.id, Token: h.token, Tags: []string{h.kind}})
			w.record(op)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// uniqueClient submits unique jobs (a few payloads, the plan's period),
// cancels some of those it learned of (their keys free), and claims and
// acks some (succeeded keeps the key). Ops: "usubmit" (Job the job
// answered, Detail "duplicate" or "created"), "ucancel", "uclaim", "uack".
func (w *workload) uniqueClient(c int, rng *rand.Rand) {
	var ids []string
	for !w.stopped() {
		req := clustertest.Request{Queue: uniqueQueue, Kind: "k", Worker: fmt.Sprintf("c%d", c), TTL: leaseTTL, Period: w.limits.period}
		switch r := rng.IntN(10); {
		case r < 6:
			req.Payload = fmt.Sprintf("u%d", rng.IntN(uniqueKeys))
			rep, op := w.call(c, rng, "usubmit", "/usubmit", req, Op{Tags: []string{req.Payload}})
			if op.Outcome == clustertest.OutcomeOK && rep.Job != nil {
				op.Job, op.Detail = rep.Job.ID, "created"
				if rep.Duplicate {
					op.Detail = "duplicate"
				}
				ids = append(ids, rep.Job.ID)
			}
			w.record(op)
		case r < 8 && len(ids) > 0:
			req.ID = ids[rng.IntN(len(ids))]
			_, op := w.call(c, rng, "ucancel", "/cancel", req, Op{Job: req.ID})
			w.record(op)
		default:
			req.Max = 1
			rep, op := w.call(c, rng, "uclaim", "/lclaim", req, Op{})
			w.record(op)
			if op.Outcome == clustertest.OutcomeOK && len(rep.Jobs) == 1 {
				req.ID, req.Token = rep.Jobs[0].ID, rep.Jobs[0].Token
				_, op := w.call(c, rng, "uack", "/ack", req, Op{Job: req.ID, Token: req.Token})
				w.record(op)
			}
		}
	}
}
