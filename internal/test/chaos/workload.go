package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/jobmodel"
)

// Op is one client operation of the recorded history.
type Op struct {
	Client  int
	Kind    string // submit, batch, claim, ack, nak, extend, cancel, watch, get
	Member  int
	Job     string // job ID (model jobs, leases); bulk submits: empty
	Tags    []string
	Token   uint64 // ack/nak/extend: the token used; claim: the token got
	Call    time.Duration
	Return  time.Duration
	Outcome string // a clustertest outcome, or "unknown" when no reply came
	Replied bool   // a reply came (Outcome "unknown" may be either)
	// NoLeader: the reply said no leader was reached within LeaderWait.
	NoLeader bool
	Detail   string
}

// Outcome of an operation that got no reply.
const noReply = "unknown"

// workload runs the clients: model clients on one-job queues (their
// operations go to porcupine), bulk clients on one shared queue doing
// everything else.
type workload struct {
	r   *runner
	rec *jobmodel.Recorder
	// recAt is the run's offset just after rec started: an operation
	// recorded at rec's time c was called at offset at most c + recAt.
	recAt time.Duration
	stop  chan struct{}
	wg    sync.WaitGroup

	mu    sync.Mutex
	ops   []Op
	specs []clustertest.ScheduleSpec // the run's schedules (schedules.go)

	limits *limitPlan // the limits and unique jobs' plan (workload_limits.go)
}

// Workload sizes.
const (
	modelClients = 3
	modelJobs    = 6
	bulkClients  = 2
	bulkQueue    = "bulk"
	leaseTTL     = time.Minute // no lease expires within a run (the model assumes it)
)

func newWorkload(r *runner) *workload {
	w := &workload{r: r, rec: jobmodel.NewRecorder(), stop: make(chan struct{})}
	w.recAt = r.since()
	return w
}

func (w *workload) start(seed uint64) {
	w.limits = newLimitPlan(seed)
	for c := 0; c < firstLimitClient+limitClients+uniqueClients; c++ {
		rng := rand.New(rand.NewPCG(seed, uint64(c)+1))
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			switch {
			case c < modelClients:
				w.modelClient(c, rng)
			case c < modelClients+bulkClients:
				w.bulkClient(c, rng)
			case c < schedClient:
				w.depsClient(c, rng)
			case c == schedClient:
				w.scheduleClient(c, rng)
			case c < firstLimitClient+limitClients:
				w.limitClient(c, rng) // workload_limits.go
			default:
				w.uniqueClient(c, rng)
			}
		}()
	}
}

func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// call sends one request to a running member and records it.
func (w *workload) call(c int, rng *rand.Rand, kind, path string, req clustertest.Request, op Op) (clustertest.Reply, Op) {
	m := w.r.pickMember(rng)
	op.Client, op.Kind, op.Member = c, kind, m
	op.Call = w.r.since()
	d := w.r.callTimeout()
	req.Timeout = d
	rep, err := w.r.p.CallT(m, path, req, d)
	op.Return = w.r.since()
	op.Outcome, op.NoLeader = rep.Outcome, rep.NoLeader
	op.Replied = err == nil
	if err != nil {
		op.Outcome = noReply
	}
	if op.Outcome == clustertest.OutcomeAmbiguous {
		w.r.violate(Verdict{Checker: "outcome-class", At: op.Call, Detail: fmt.Sprintf("%s %s on m%d: an error of no single outcome class: %s", kind, op.Job, m, rep.Error)})
	}
	return rep, op
}

func (w *workload) record(op Op) {
	w.mu.Lock()
	w.ops = append(w.ops, op)
	w.mu.Unlock()
}

func (w *workload) all() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...)
}

func modelOutcome(o string) jobmodel.Outcome {
	switch o {
	case clustertest.OutcomeOK:
		return jobmodel.OK
	case clustertest.OutcomeNotSubmitted, clustertest.OutcomeError:
		return jobmodel.NotDone
	case clustertest.OutcomeStale:
		return jobmodel.Stale
	}
	return jobmodel.Unknown
}

// modelClient submits, claims, acks, naks and reads the model jobs.
func (w *workload) modelClient(c int, rng *rand.Rand) {
	tokens := map[string][]uint64{}
	for !w.stopped() {
		in, k := jobmodel.NextInput(rng.IntN, modelJobs, "mj", tokens)
		kind := in.Kind.String()
		call := w.rec.Now()
		rep, op := w.call(c, rng, kind, "/"+kind, modelRequest(c, in, k), Op{Job: in.Job, Token: in.Token})
		out := modelOutput(in, op.Outcome, rep)
		switch in.Kind {
		case jobmodel.Claim:
			if out.Token != 0 {
				op.Token = out.Token
				tokens[in.Job] = append(tokens[in.Job], out.Token)
			}
		case jobmodel.Get:
			if out.Outcome != jobmodel.OK {
				w.record(op)
				continue // a failed read has no effect: leave it out of the model
			}
		}
		w.rec.Add(c, in, out, call)
		w.record(op)
	}
}

// modelRequest is the member API request of client c's model operation in
// on job k: the very request the model judges, an ack's result and a nak's
// error included (the model tells a repeat of the request that ended a
// lease from another request under its token by them).
func modelRequest(c int, in jobmodel.Input, k int) clustertest.Request {
	return clustertest.Request{ID: in.Job, Queue: fmt.Sprintf("mq-%d", k), Worker: fmt.Sprintf("c%d", c), TTL: leaseTTL, MaxAttempts: 10000,
		Token: in.Token, Result: in.Result}
}

// modelOutput is what the model learns from the reply rep, of outcome o,
// to the model operation in: a claim's token, a get's state, token, and a
// succeeded job's result.
func modelOutput(in jobmodel.Input, o string, rep clustertest.Reply) jobmodel.Output {
	out := jobmodel.Output{Outcome: modelOutcome(o)}
	if out.Outcome != jobmodel.OK {
		return out
	}
	switch in.Kind {
	case jobmodel.Claim:
		if len(rep.Jobs) == 1 {
			out.Token = rep.Jobs[0].Token
		}
	case jobmodel.Get:
		out.State = jobmodel.Absent
		if rep.Job != nil {
			out.State, out.Token = jobmodel.GetState(rep.Job.State), rep.Job.Token
			if out.State == jobmodel.Succeeded {
				out.Result = rep.Job.Result
			}
		}
	}
	return out
}

// lease is a bulk client's claimed job.
type lease struct {
	id    string
	token uint64
}

// bulkClient does the rest of the API on the shared queue: submits and
// batches (unique payload tags, IDs assigned by the controller), claims,
// acks, naks, extends (sometimes with a stale token), cancels and watches.
func (w *workload) bulkClient(c int, rng *rand.Rand) {
	var held, old []lease
	var ids []string
	n := 0
	tag := func() string { n++; return fmt.Sprintf("t%d-%d", c, n) }
	for !w.stopped() {
		req := clustertest.Request{Queue: bulkQueue, Worker: fmt.Sprintf("c%d", c), TTL: leaseTTL, MaxAttempts: 10000}
		switch r := rng.IntN(20); {
		case r < 5:
			t := tag()
			req.Payload = t
			rep, op := w.call(c, rng, "submit", "/submit", req, Op{Tags: []string{t}})
			if rep.Job != nil && rep.Job.ID != "" {
				op.Job = rep.Job.ID
				ids = append(ids, rep.Job.ID)
			}
			w.record(op)
		case r < 7:
			req.Payloads = []string{tag(), tag(), tag()}
			rep, op := w.call(c, rng, "batch", "/batch", req, Op{Tags: req.Payloads})
			op.Detail = fmt.Sprint(rep.Outcomes)
			w.record(op)
			if op.Outcome != noReply && len(rep.Outcomes) == len(req.Payloads) {
				for i, t := range req.Payloads {
					w.record(Op{Client: c, Kind: "batch-job", Member: op.Member, Tags: []string{t}, Call: op.Call, Return: op.Return, Outcome: rep.Outcomes[i]})
				}
			} else {
				for _, t := range req.Payloads {
					w.record(Op{Client: c, Kind: "batch-job", Member: op.Member, Tags: []string{t}, Call: op.Call, Return: op.Return, Outcome: noReply})
				}
			}
		case r < 11:
			rep, op := w.call(c, rng, "claim", "/claim", req, Op{})
			if op.Outcome == clustertest.OutcomeOK && len(rep.Jobs) == 1 {
				op.Job, op.Token = rep.Jobs[0].ID, rep.Jobs[0].Token
				held = append(held, lease{op.Job, op.Token})
			}
			w.record(op)
		case r < 16 && (len(held) > 0 || len(old) > 0):
			var l lease
			if len(old) > 0 && (len(held) == 0 || rng.IntN(4) == 0) {
				l = old[rng.IntN(len(old))] // a lease that ended or may have
			} else {
				i := rng.IntN(len(held))
				l = held[i]
				if r < 14 { // ack or nak end it; extend keeps it
					held = append(held[:i], held[i+1:]...)
					old = append(old, l)
				}
			}
			kind := []string{"ack", "ack", "nak", "extend", "extend"}[r-11]
			req.ID, req.Token = l.id, l.token
			_, op := w.call(c, rng, kind, "/"+kind, req, Op{Job: l.id, Token: l.token})
			w.record(op)
		case r < 17 && len(ids) > 0:
			req.ID = ids[rng.IntN(len(ids))]
			_, op := w.call(c, rng, "cancel", "/cancel", req, Op{Job: req.ID})
			w.record(op)
		default:
			req.Wait = 150 * time.Millisecond
			rep, op := w.call(c, rng, "watch", "/watch", req, Op{})
			op.Detail = fmt.Sprintf("%d events", len(rep.Events))
			for i := 1; i < len(rep.Events); i++ {
				if rep.Events[i].Index < rep.Events[i-1].Index {
					w.r.violate(Verdict{Checker: "watch", At: op.Call, Index: rep.Events[i].Index,
						Detail: fmt.Sprintf("m%d's watch went back from index %d to %d", op.Member, rep.Events[i-1].Index, rep.Events[i].Index)})
				}
			}
			w.record(op)
		}
	}
}
