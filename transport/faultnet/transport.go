package faultnet

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Wrap returns inner with this network's faults applied to every outbound
// raft RPC of the member at local (its advertised address): AppendEntries
// (including heartbeats and the pipeline, requests and responses),
// RequestVote, RequestPreVote, InstallSnapshot and TimeoutNow. Inbound RPCs
// pass through untouched (the sender's wrapper already judged them).
//
// The result keeps the inner transport's optional abilities, which
// hashicorp/raft detects by type assertion: it implements raft.WithPreVote if
// and only if inner does (otherwise raft would silently turn pre-vote off, or
// call a method the inner cannot serve), raft.WithPeers if inner does, and
// always raft.WithClose (closing the wrapper stops its delays and duplicate
// deliveries, then closes inner if it implements raft.WithClose).
//
// A refused or lost message surfaces as an error wrapping ErrInjected;
// a lost pipelined response completes its future with such an error and a
// zeroed response.
func (n *Network) Wrap(local raft.ServerAddress, inner raft.Transport) raft.Transport {
	t := &faultTransport{n: n, local: local, inner: inner, done: make(chan struct{})}
	_, pv := inner.(raft.WithPreVote)
	_, peers := inner.(raft.WithPeers)
	switch {
	case pv && peers:
		return faultTransportPreVotePeers{t}
	case pv:
		return faultTransportPreVote{t}
	case peers:
		return faultTransportPeers{t}
	default:
		return t
	}
}

// faultTransport is the base wrapper: raft.Transport and raft.WithClose.
type faultTransport struct {
	n     *Network
	local raft.ServerAddress
	inner raft.Transport

	done chan struct{} // closed by Close
	once sync.Once
	wg   sync.WaitGroup // duplicate deliveries in flight
}

// The wrappers exposing the inner transport's optional abilities.
type (
	faultTransportPreVote      struct{ *faultTransport }
	faultTransportPeers        struct{ *faultTransport }
	faultTransportPreVotePeers struct{ *faultTransport }
)

var (
	_ raft.Transport                       = (*faultTransport)(nil)
	_ raft.WithClose                       = (*faultTransport)(nil)
	_ raft.WithPreVote                     = faultTransportPreVote{}
	_ raft.WithClose                       = faultTransportPreVote{}
	_ raft.WithPeers                       = faultTransportPeers{}
	_ raft.LoopbackTransport               = faultTransportPreVotePeers{}
	_ raft.AppendPipeline                  = (*faultPipeline)(nil)
	_ raft.AppendFuture                    = (*lostFuture)(nil)
	_ interface{ Unwrap() raft.Transport } = (*faultTransport)(nil)
)

// RequestPreVote implements raft.WithPreVote.
func (t faultTransportPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.requestPreVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t faultTransportPreVotePeers) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.requestPreVote(id, target, args, resp)
}

// Connect implements raft.WithPeers by delegation.
func (t faultTransportPeers) Connect(peer raft.ServerAddress, tr raft.Transport) {
	t.inner.(raft.WithPeers).Connect(peer, unwrapTransport(tr))
}

// Disconnect implements raft.WithPeers by delegation.
func (t faultTransportPeers) Disconnect(peer raft.ServerAddress) {
	t.inner.(raft.WithPeers).Disconnect(peer)
}

// DisconnectAll implements raft.WithPeers by delegation.
func (t faultTransportPeers) DisconnectAll() { t.inner.(raft.WithPeers).DisconnectAll() }

// Connect implements raft.WithPeers by delegation.
func (t faultTransportPreVotePeers) Connect(peer raft.ServerAddress, tr raft.Transport) {
	t.inner.(raft.WithPeers).Connect(peer, unwrapTransport(tr))
}

// Disconnect implements raft.WithPeers by delegation.
func (t faultTransportPreVotePeers) Disconnect(peer raft.ServerAddress) {
	t.inner.(raft.WithPeers).Disconnect(peer)
}

// DisconnectAll implements raft.WithPeers by delegation.
func (t faultTransportPreVotePeers) DisconnectAll() { t.inner.(raft.WithPeers).DisconnectAll() }

// unwrapTransport returns the innermost transport of a wrapped one, so an
// in-memory transport can be connected to its peer's real endpoint.
func unwrapTransport(tr raft.Transport) raft.Transport {
	for {
		u, ok := tr.(interface{ Unwrap() raft.Transport })
		if !ok {
			return tr
		}
		tr = u.Unwrap()
	}
}

// Unwrap returns the wrapped transport.
func (t *faultTransport) Unwrap() raft.Transport { return t.inner }

// Consumer implements raft.Transport by delegation.
func (t *faultTransport) Consumer() <-chan raft.RPC { return t.inner.Consumer() }

// LocalAddr implements raft.Transport by delegation.
func (t *faultTransport) LocalAddr() raft.ServerAddress { return t.inner.LocalAddr() }

// EncodePeer implements raft.Transport by delegation.
func (t *faultTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return t.inner.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport by delegation.
func (t *faultTransport) DecodePeer(b []byte) raft.ServerAddress { return t.inner.DecodePeer(b) }

// SetHeartbeatHandler implements raft.Transport by delegation.
func (t *faultTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) { t.inner.SetHeartbeatHandler(cb) }

// Close implements raft.WithClose.
func (t *faultTransport) Close() error {
	var err error
	t.once.Do(func() {
		close(t.done)
		t.wg.Wait()
		if c, ok := t.inner.(raft.WithClose); ok {
			err = c.Close()
		}
	})
	return err
}

// roundTrip applies the network's rules around one synchronous RPC. call
// performs the real RPC. dup, if non-nil, is called at send time when the
// message is to be duplicated: it takes a deep copy of the request (the
// caller may reuse its request once call returns, see faults_copy.go) and
// returns the delivery of that copy, whose outcome is discarded.
func (t *faultTransport) roundTrip(kind string, target raft.ServerAddress, call func() error, dup func() func()) error {
	v := t.n.decide(kind, t.local, target, true)
	if v.lost != "" {
		return fmt.Errorf("%w: %s %s->%s refused: %s", ErrInjected, kind, t.local, target, v.lost)
	}
	if !sleep(context.Background(), t.done, v.delay) {
		return raft.ErrTransportShutdown
	}
	if v.dup && dup != nil {
		deliver := dup()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if sleep(context.Background(), t.done, v.dupLag) {
				deliver()
			}
		}()
	}
	if err := call(); err != nil {
		return err
	}
	rv := t.n.decide(kind, target, t.local, false)
	if rv.lost != "" {
		return fmt.Errorf("%w: %s %s->%s response lost: %s", ErrInjected, kind, target, t.local, rv.lost)
	}
	if !sleep(context.Background(), t.done, rv.delay) {
		return raft.ErrTransportShutdown
	}
	return nil
}

// AppendEntries implements raft.Transport.
func (t *faultTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.n.recordAppend(t.local, args)
	return t.roundTrip(KindAppendEntries, target,
		func() error { return t.inner.AppendEntries(id, target, args, resp) },
		func() func() {
			c := copyAppendEntries(args)
			return func() { _ = t.inner.AppendEntries(id, target, c, new(raft.AppendEntriesResponse)) }
		})
}

// RequestVote implements raft.Transport.
func (t *faultTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.roundTrip(KindRequestVote, target,
		func() error { return t.inner.RequestVote(id, target, args, resp) },
		func() func() {
			c := copyRequestVote(args)
			return func() { _ = t.inner.RequestVote(id, target, c, new(raft.RequestVoteResponse)) }
		})
}

func (t *faultTransport) requestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv := t.inner.(raft.WithPreVote) // only reachable through the pre-vote wrappers
	return t.roundTrip(KindRequestPreVote, target,
		func() error { return pv.RequestPreVote(id, target, args, resp) },
		func() func() {
			c := copyPreVote(args)
			return func() { _ = pv.RequestPreVote(id, target, c, new(raft.RequestPreVoteResponse)) }
		})
}

// InstallSnapshot implements raft.Transport. It is never duplicated (the data
// stream can be read once).
func (t *faultTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.roundTrip(KindInstallSnapshot, target,
		func() error { return t.inner.InstallSnapshot(id, target, args, resp, data) }, nil)
}

// TimeoutNow implements raft.Transport.
func (t *faultTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.roundTrip(KindTimeoutNow, target,
		func() error { return t.inner.TimeoutNow(id, target, args, resp) },
		func() func() {
			c := copyTimeoutNow(args)
			return func() { _ = t.inner.TimeoutNow(id, target, c, new(raft.TimeoutNowResponse)) }
		})
}

// AppendEntriesPipeline implements raft.Transport: the inner pipeline wrapped
// so each pipelined request and each response obeys the same rules. Opening a
// pipeline over a link that is down fails.
func (t *faultTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if !t.n.LinkUp(t.local, target) {
		return nil, fmt.Errorf("%w: pipeline %s->%s: link down", ErrInjected, t.local, target)
	}
	inner, err := t.inner.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &faultPipeline{
		t: t, id: id, target: target, inner: inner,
		out:  make(chan raft.AppendFuture),
		stop: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.forward()
	return p, nil
}

// faultPipeline applies faults to a pipeline. Requests: refused ones fail the
// AppendEntries call (raft then drops back to synchronous replication, as on
// a broken connection); delays block the sender in order; duplicates are
// delivered out of band through the synchronous path. Responses: forwarded in
// order from the inner Consumer, delayed, or completed as lost.
type faultPipeline struct {
	t      *faultTransport
	id     raft.ServerID
	target raft.ServerAddress
	inner  raft.AppendPipeline

	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// AppendEntries implements raft.AppendPipeline.
func (p *faultPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	t := p.t
	t.n.recordAppend(t.local, args)
	v := t.n.decide(KindAppendEntries, t.local, p.target, true)
	if v.lost != "" {
		return nil, fmt.Errorf("%w: pipelined AppendEntries %s->%s refused: %s", ErrInjected, t.local, p.target, v.lost)
	}
	if !sleep(context.Background(), p.stop, v.delay) {
		return nil, raft.ErrPipelineShutdown
	}
	if v.dup {
		c := copyAppendEntries(args) // taken now: see faults_copy.go
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if sleep(context.Background(), t.done, v.dupLag) {
				_ = t.inner.AppendEntries(p.id, p.target, c, new(raft.AppendEntriesResponse))
			}
		}()
	}
	return p.inner.AppendEntries(args, resp)
}

// forward moves completed inner futures to the consumer, applying response
// faults in order.
func (p *faultPipeline) forward() {
	defer p.wg.Done()
	t := p.t
	for {
		var f raft.AppendFuture
		select {
		case f = <-p.inner.Consumer():
		case <-p.stop:
			return
		}
		if f.Error() == nil {
			rv := t.n.decide(KindAppendEntries, p.target, t.local, false)
			if rv.lost != "" {
				*f.Response() = raft.AppendEntriesResponse{}
				f = &lostFuture{AppendFuture: f, err: fmt.Errorf("%w: pipelined AppendEntries %s->%s response lost: %s",
					ErrInjected, p.target, t.local, rv.lost)}
			} else if !sleep(context.Background(), p.stop, rv.delay) {
				return
			}
		}
		select {
		case p.out <- f:
		case <-p.stop:
			return
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (p *faultPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close implements raft.AppendPipeline.
func (p *faultPipeline) Close() error {
	var err error
	p.once.Do(func() {
		close(p.stop)
		err = p.inner.Close()
		p.wg.Wait()
	})
	return err
}

// lostFuture is a completed pipelined append whose response was lost.
type lostFuture struct {
	raft.AppendFuture
	err error
}

// Error implements raft.Future.
func (f *lostFuture) Error() error { return f.err }
