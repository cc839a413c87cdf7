package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobraft/jobraft"
)

// The backlog's queue and kind.
const (
	backlogQueue = "scale"
	backlogKind  = "k"
	// delayed jobs wait this long: they stay scheduled through the run.
	delay = 48 * time.Hour
)

// job is the i-th job of the mix: priorities 0..3 in turn, every tenth
// delayed (scheduled two days out), the given payload; id "" lets the
// controller assign one.
func job(i uint64, id, queue, kind string, payload []byte) jobraft.SubmitRequest {
	r := jobraft.SubmitRequest{ID: id, Queue: queue, Kind: kind, Payload: payload, Priority: int32(i % 4)}
	if i%10 == 9 {
		r.Delay = delay
	}
	return r
}

// submitAll submits reqs through the leader until every one is
// acknowledged: a refused or unknown outcome is resubmitted with the same
// ID (the ID is the idempotency key), so each exists once.
func submitAll(ctx context.Context, c *cluster, reqs []jobraft.SubmitRequest) error {
	for len(reqs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := c.waitLeader(30 * time.Second)
		if err != nil {
			return err
		}
		res, err := l.SubmitBatch(ctx, reqs)
		if err != nil && res == nil {
			continue
		}
		var again []jobraft.SubmitRequest
		for i, r := range res {
			if r.Err != nil {
				if !errors.Is(r.Err, jobraft.ErrMayExist) && !errors.Is(r.Err, jobraft.ErrNotSubmitted) {
					return r.Err
				}
				again = append(again, reqs[i])
			}
		}
		reqs = again
	}
	return nil
}

// preload submits n jobs built by mk(i) through the leader in batches of
// 4096 from four goroutines (SubmitBatch cuts each into entries of up to
// 1024 jobs: the real path, raft and fsync included), calling progress
// with the count acknowledged so far.
func preload(c *cluster, n int, mk func(i uint64) jobraft.SubmitRequest, progress func(done int)) error {
	const batch, workers = 4096, 4
	var next, done atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				b := int(next.Add(batch)) - batch
				if b >= n {
					return
				}
				reqs := make([]jobraft.SubmitRequest, 0, batch)
				for i := b; i < min(b+batch, n); i++ {
					reqs = append(reqs, mk(uint64(i)))
				}
				if err := submitAll(ctx, c, reqs); err != nil {
					errs <- err
					cancel()
					return
				}
				progress(int(done.Add(int64(len(reqs)))))
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// backlogJob is the i-th job of the backlog (its ID fixed: preload
// resubmits by ID).
func backlogJob(payload []byte) func(i uint64) jobraft.SubmitRequest {
	return func(i uint64) jobraft.SubmitRequest {
		return job(i, fmt.Sprintf("p%09d", i), backlogQueue, backlogKind, payload)
	}
}

// ops builds the measured operations on a cluster's leader.
type ops struct {
	l       *jobraft.Controller
	payload []byte
	seq     atomic.Uint64
}

// submit is one Submit of the mix to the backlog's queue.
func (o *ops) submit(ctx context.Context, _ int) (time.Duration, error) {
	_, err := o.l.Submit(ctx, job(o.seq.Add(1), "", backlogQueue, backlogKind, o.payload))
	return 0, err
}

// cycle submits a ready job (of the mix's priorities) to queue with
// kind, claims one job of queue (of kind only, when byKind), and acks it;
// it returns how long the claim took. (A delayed job would leave an empty
// backlog's claims waiting: each cycle takes one ready job.)
func (o *ops) cycle(ctx context.Context, c int, queue, kind string, byKind bool) (time.Duration, error) {
	sub := job(o.seq.Add(1), "", queue, kind, o.payload)
	sub.Delay = 0
	if _, err := o.l.Submit(ctx, sub); err != nil {
		return 0, err
	}
	req := jobraft.ClaimRequest{Queues: []string{queue}, Worker: fmt.Sprint("w", c), Wait: 10 * time.Second}
	if byKind {
		req.Kinds = []string{kind}
	}
	t0 := time.Now()
	ls, err := o.l.Claim(ctx, req)
	took := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if len(ls) != 1 {
		return 0, errors.New("claim returned no job")
	}
	return took, ls[0].Ack(ctx, nil)
}

// backlogCycle is a cycle on the backlog's queue.
func (o *ops) backlogCycle(ctx context.Context, c int) (time.Duration, error) {
	return o.cycle(ctx, c, backlogQueue, backlogKind, false)
}

// queueName is the i-th queue of the many-queues scenario.
func queueName(i int) string { return fmt.Sprintf("q%05d", i) }

// kindName is the i-th kind of the many-kinds scenario.
func kindName(i int) string { return fmt.Sprintf("kind%03d", i) }

// manyQueuesCycle is a cycle on a random one of n queues.
func (o *ops) manyQueuesCycle(n int) op {
	return func(ctx context.Context, c int) (time.Duration, error) {
		return o.cycle(ctx, c, queueName(rand.IntN(n)), backlogKind, false)
	}
}

// manyKindsCycle is a cycle on one queue holding n kinds: client c
// submits and claims its own kind.
func (o *ops) manyKindsCycle(n int) op {
	return func(ctx context.Context, c int) (time.Duration, error) {
		return o.cycle(ctx, c, "kinds", kindName(c%n), true)
	}
}
