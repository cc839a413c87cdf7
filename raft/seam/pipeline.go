package seam

import (
	"sync"

	"github.com/hashicorp/raft"
)

// DrainPipelines wraps a hashicorp/raft NetworkTransport so that its append
// pipelines can never wedge replication (hashicorp/raft #612).
//
// The deadlock it removes: raft's pipeline decoder stops reading a
// pipeline's Consumer as soon as a follower answers !Success (a refused
// append: a guard refusal, a failed write, a log mismatch). The transport's
// response reader then blocks handing over the next response, stops taking
// in-flight requests, and the leader's next pipelined send blocks for ever
// — so it never notices the decoder ended, never falls back to plain
// replication, never replicates to that follower again, and Shutdown hangs
// waiting for it. The wrapper keeps reading the pipeline's responses into a
// queue of its own (bounded in practice by the sends in flight) and hands
// them to raft as it reads them, so the sender always gets through, sees
// the decoder ended and restarts replication.
//
// Everything else (pre-vote, Close, the RPCs) is the NetworkTransport's own.
func DrainPipelines(t *raft.NetworkTransport) raft.Transport { return drained{t} }

type drained struct{ *raft.NetworkTransport }

var (
	_ raft.Transport      = drained{}
	_ raft.WithPreVote    = drained{}
	_ raft.WithClose      = drained{}
	_ raft.AppendPipeline = (*drainPipeline)(nil)
)

// AppendEntriesPipeline implements raft.Transport.
func (d drained) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := d.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainPipeline(p), nil
}

// drainPipeline reads the inner pipeline's responses without ever blocking
// on raft, and offers them to raft in order.
type drainPipeline struct {
	inner raft.AppendPipeline
	out   chan raft.AppendFuture
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
}

func newDrainPipeline(inner raft.AppendPipeline) *drainPipeline {
	p := &drainPipeline{inner: inner, out: make(chan raft.AppendFuture), stop: make(chan struct{}), done: make(chan struct{})}
	go p.drain()
	return p
}

func (p *drainPipeline) drain() {
	defer close(p.done)
	in := p.inner.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var head raft.AppendFuture
		if len(queue) > 0 {
			out, head = p.out, queue[0]
		}
		select {
		case f, ok := <-in:
			if !ok {
				return
			}
			queue = append(queue, f)
		case out <- head:
			queue[0] = nil
			queue = queue[1:]
		case <-p.stop:
			return
		}
	}
}

// AppendEntries implements raft.AppendPipeline.
func (p *drainPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return p.inner.AppendEntries(args, resp)
}

// Consumer implements raft.AppendPipeline.
func (p *drainPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close implements raft.AppendPipeline: it closes the inner pipeline, then
// stops draining.
func (p *drainPipeline) Close() error {
	err := p.inner.Close()
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return err
}
