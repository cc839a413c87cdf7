package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// The dependency client and its checkers. It submits small graphs (two
// parents and a child after both, the child at a higher priority so a
// claim takes it first the moment it is claimable) and batches (three
// members, the third after the first, with a completion job), claims and
// acks them (or cancels some, which cancels their dependents), and the
// run is judged by:
//
//   - deps-order: no dependent was claimed before all its parents were
//     acknowledged as succeeded: every parent of a job a claim returned
//     has an ack (answered ok, or of unknown outcome) called before that
//     claim returned. Parents succeed only by acks, and a claim that
//     returned before a parent's first ack was called took effect while
//     the parent had not succeeded. Strict under every fault (a lost ack
//     is still in the history).
//   - batch-once: on every judged member after convergence, a batch's
//     completion job exists at most once (by its payload tag), only once
//     every member it holds ended, created no earlier than the last of
//     them ended (log times: the state machine's clock never goes back),
//     and exists when they all ended.

// depsClients is the number of dependency clients.
const depsClients = 1

// depQueues are client c's queues: graph jobs, batch members and the
// batches' completion jobs.
func depQueues(c int) []string {
	return []string{fmt.Sprintf("dq-%d", c), fmt.Sprintf("bq-%d", c), fmt.Sprintf("bq-%d-done", c)}
}

// depsClient submits graphs and batches and works them off.
func (w *workload) depsClient(c int, rng *rand.Rand) {
	qs := depQueues(c)
	n := 0
	var parents []string // submitted parents, for cancels
	var batches []string
	for !w.stopped() {
		req := clustertest.Request{Worker: fmt.Sprintf("c%d", c), TTL: leaseTTL, MaxAttempts: 10000}
		switch r := rng.IntN(12); {
		case r < 2:
			n++
			a, b, child := fmt.Sprintf("d%d-%d-a", c, n), fmt.Sprintf("d%d-%d-b", c, n), fmt.Sprintf("d%d-%d-c", c, n)
			for _, id := range []string{a, b} {
				req.ID, req.Queue, req.Payload = id, qs[0], id
				_, op := w.call(c, rng, "submit-dep", "/submit", req, Op{Job: id})
				w.record(op)
			}
			parents = append(parents, a, b)
			req.ID, req.Payload, req.After, req.Priority = child, child, []string{a, b}, 1
			_, op := w.call(c, rng, "submit-dep", "/submit", req, Op{Job: child, Tags: req.After})
			w.record(op)
		case r < 3:
			n++
			id := fmt.Sprintf("db%d-%d", c, n)
			req.Batch, req.Queue, req.ID, req.Payload = id, qs[1], id+"-done", id+"-done"
			req.IDs = []string{id + "-1", id + "-2", id + "-3"}
			req.Payloads = req.IDs
			req.Afters = [][]string{nil, nil, {id + "-1"}}
			rep, op := w.call(c, rng, "create-batch", "/create-batch", req, Op{Job: id, Tags: req.IDs})
			op.Detail = fmt.Sprint(rep.Outcomes)
			w.record(op)
			// The batch's dependent job, as its own submit for the
			// dependency checks: the batch call's reply is its reply
			// (leader-wait read a copy without Replied as never answered).
			w.record(Op{Client: c, Kind: "submit-dep", Member: op.Member, Job: id + "-3", Tags: []string{id + "-1"}, Call: op.Call, Return: op.Return,
				Outcome: op.Outcome, Replied: op.Replied, NoLeader: op.NoLeader})
			batches = append(batches, id)
		case r < 10:
			req.Queue = qs[rng.IntN(2)]
			rep, op := w.call(c, rng, "claim-dep", "/claim", req, Op{})
			if op.Outcome != clustertest.OutcomeOK || len(rep.Jobs) != 1 {
				w.record(op)
				continue
			}
			op.Job, op.Token = rep.Jobs[0].ID, rep.Jobs[0].Token
			w.record(op)
			req.ID, req.Token = op.Job, op.Token
			if rng.IntN(8) == 0 {
				_, cop := w.call(c, rng, "cancel-dep", "/cancel", req, Op{Job: op.Job})
				w.record(cop)
				continue
			}
			_, aop := w.call(c, rng, "ack-dep", "/ack", req, Op{Job: op.Job, Token: op.Token})
			w.record(aop)
		case r < 11 && len(parents) > 0:
			req.ID = parents[rng.IntN(len(parents))]
			_, op := w.call(c, rng, "cancel-dep", "/cancel", req, Op{Job: req.ID})
			w.record(op)
		case len(batches) > 0:
			req.Batch = batches[rng.IntN(len(batches))]
			_, op := w.call(c, rng, "get-batch", "/get-batch", req, Op{Job: req.Batch})
			w.record(op)
		}
	}
}

// listDeps lists the dependency client's queues on every judged member
// (after convergence) for batch-once.
func (r *runner) listDeps() []Verdict {
	r.depLists = map[int][]clustertest.JobView{}
	for _, i := range r.judged() {
		var jobs []clustertest.JobView
		for c := modelClients + bulkClients; c < modelClients+bulkClients+depsClients; c++ {
			for _, q := range depQueues(c) {
				rep, err := r.p.CallT(i, "/list", clustertest.Request{Queue: q, Local: true}, 10*time.Second)
				if err != nil || rep.Outcome != clustertest.OutcomeOK {
					r.depLists = nil
					return []Verdict{{Checker: "batch-once", At: r.since(), Detail: fmt.Sprintf("m%d: list %s: %v %s", i, q, err, rep.Error)}}
				}
				jobs = append(jobs, rep.Jobs...)
			}
		}
		r.depLists[i] = jobs
	}
	return nil
}

// depsOrder is the deps-order checker (see the file comment).
func depsOrder(ops []Op) Verdict {
	parents := map[string][]string{}
	acked := map[string]time.Duration{} // job → the earliest call of an ack that may have applied
	for _, op := range ops {
		switch op.Kind {
		case "submit-dep":
			if len(op.Tags) > 0 {
				parents[op.Job] = op.Tags
			}
		case "ack-dep":
			if op.Outcome == clustertest.OutcomeOK || op.Outcome == clustertest.OutcomeUnknown || op.Outcome == noReply {
				if at, ok := acked[op.Job]; !ok || op.Call < at {
					acked[op.Job] = op.Call
				}
			}
		}
	}
	checked := 0
	for _, op := range ops {
		if op.Kind != "claim-dep" || op.Outcome != clustertest.OutcomeOK || len(parents[op.Job]) == 0 {
			continue
		}
		checked++
		for _, p := range parents[op.Job] {
			at, ok := acked[p]
			if !ok || at > op.Return {
				when := "never"
				if ok {
					when = "first at " + at.Round(time.Millisecond).String()
				}
				return Verdict{Checker: "deps-order", At: op.Call, Index: op.Token,
					Detail: fmt.Sprintf("dependent %s claimed (token %d, returned at %s) before its parent %s was acknowledged (acked %s)", op.Job, op.Token, op.Return.Round(time.Millisecond), p, when)}
			}
		}
	}
	return Verdict{Checker: "deps-order", OK: true, Detail: fmt.Sprintf("%d claims of dependents, each after its parents' acks", checked)}
}

// batchOnce is the batch-once checker (see the file comment).
func (r *runner) batchOnce(ops []Op) Verdict {
	if r.depLists == nil {
		return Verdict{Checker: "batch-once", OK: true, Detail: "not checked: the members did not converge"}
	}
	var ids []string
	for _, op := range ops {
		if op.Kind == "create-batch" {
			ids = append(ids, op.Job)
		}
	}
	members := make([]int, 0, len(r.depLists))
	for i := range r.depLists {
		members = append(members, i)
	}
	sort.Ints(members)
	completed := 0
	for _, i := range members {
		for _, id := range ids {
			var done []clustertest.JobView
			var held []clustertest.JobView
			for _, j := range r.depLists[i] {
				switch {
				case j.Payload == id+"-done":
					done = append(done, j)
				case j.Batch == id:
					held = append(held, j)
				}
			}
			ended := len(held) > 0 && !slices.ContainsFunc(held, func(j clustertest.JobView) bool { return j.Finished.IsZero() })
			switch {
			case len(done) > 1:
				return Verdict{Checker: "batch-once", At: r.since(), Detail: fmt.Sprintf("m%d holds batch %s's completion job %d times", i, id, len(done))}
			case len(done) == 1:
				for _, j := range held {
					if j.Finished.IsZero() || j.Finished.After(done[0].Created) {
						return Verdict{Checker: "batch-once", At: r.since(), Detail: fmt.Sprintf("m%d: batch %s's completion job %s was created at %s, before member %s ended (%s, at %s)",
							i, id, done[0].ID, done[0].Created.Format(time.RFC3339Nano), j.ID, j.State, j.Finished.Format(time.RFC3339Nano))}
					}
				}
				completed++
			case ended:
				return Verdict{Checker: "batch-once", At: r.since(), Detail: fmt.Sprintf("m%d: every member of batch %s ended, no completion job", i, id)}
			}
		}
	}
	return Verdict{Checker: "batch-once", OK: true, Detail: fmt.Sprintf("%d batches created, %d completions (member × batch), each once and after its members", len(ids), completed)}
}
