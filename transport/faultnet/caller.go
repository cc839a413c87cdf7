package faultnet

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// WrapCaller returns inner with this network's faults applied to every Call
// made by the member at local (its advertised address), with the same link
// rules and dice as raft traffic (counted under KindCall):
//   - request refused (link down or dropped): transport.ErrNotDelivered wrapping
//     ErrInjected; inner is not called;
//   - request delay: if ctx ends during it, transport.ErrNotDelivered;
//   - duplicate: inner is called a second time after the first returns, with
//     the same request, and that outcome is discarded;
//   - a response lost once on purpose (LoseCallResponses), then
//     response lost (after inner returned, whatever it returned):
//     transport.ErrIndeterminate wrapping ErrInjected; a response delay cut short
//     by ctx is transport.ErrIndeterminate too.
func (n *Network) WrapCaller(local string, inner transport.Caller) transport.Caller {
	return &faultCaller{n: n, local: raft.ServerAddress(local), inner: inner}
}

type faultCaller struct {
	n     *Network
	local raft.ServerAddress
	inner transport.Caller
}

var _ transport.Caller = (*faultCaller)(nil)

// Call implements transport.Caller.
func (c *faultCaller) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	target := raft.ServerAddress(addr)
	v := c.n.decide(KindCall, c.local, target, true)
	if v.lost != "" {
		return nil, notDelivered(addr, method, fmt.Errorf("%w: %s", ErrInjected, v.lost))
	}
	if !sleep(ctx, nil, v.delay) {
		return nil, notDelivered(addr, method, ctx.Err())
	}
	reply, err := c.inner.Call(ctx, addr, method, req)
	if v.dup && sleep(ctx, nil, v.dupLag) {
		_, _ = c.inner.Call(ctx, addr, method, req)
	}
	if errors.Is(err, transport.ErrNotDelivered) || errors.Is(err, transport.ErrIndeterminate) {
		return reply, err // no response came back, so there is none to lose
	}
	if c.n.takeCallLoss(c.local, target, method) {
		return nil, lostOnce(addr, method)
	}
	rv := c.n.decide(KindCall, target, c.local, false)
	if rv.lost != "" {
		return nil, indeterminate(addr, method, fmt.Errorf("%w: response %s", ErrInjected, rv.lost))
	}
	if !sleep(ctx, nil, rv.delay) {
		return nil, indeterminate(addr, method, ctx.Err())
	}
	return reply, err
}
