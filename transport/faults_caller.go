package transport

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// WrapCaller returns inner with this network's faults applied to every Call
// made by the member at local (its advertised address), with the same link
// rules and dice as raft traffic (counted under KindCall):
//   - request refused (link down or dropped): ErrNotDelivered wrapping
//     ErrFaultInjected; inner is not called;
//   - request delay: if ctx ends during it, ErrNotDelivered;
//   - duplicate: inner is called a second time after the first returns, with
//     the same request, and that outcome is discarded;
//   - a response lost once on purpose (LoseCallResponses), then
//     response lost (after inner returned, whatever it returned):
//     ErrIndeterminate wrapping ErrFaultInjected; a response delay cut short
//     by ctx is ErrIndeterminate too.
func (n *FaultNetwork) WrapCaller(local string, inner Caller) Caller {
	return &faultCaller{n: n, local: raft.ServerAddress(local), inner: inner}
}

type faultCaller struct {
	n     *FaultNetwork
	local raft.ServerAddress
	inner Caller
}

var _ Caller = (*faultCaller)(nil)

// Call implements Caller.
func (c *faultCaller) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	target := raft.ServerAddress(addr)
	v := c.n.decide(KindCall, c.local, target, true)
	if v.lost != "" {
		return nil, notDelivered("fault", addr, method, fmt.Errorf("%w: %s", ErrFaultInjected, v.lost))
	}
	if !sleep(ctx, nil, v.delay) {
		return nil, notDelivered("fault", addr, method, ctx.Err())
	}
	reply, err := c.inner.Call(ctx, addr, method, req)
	if v.dup && sleep(ctx, nil, v.dupLag) {
		_, _ = c.inner.Call(ctx, addr, method, req)
	}
	if errors.Is(err, ErrNotDelivered) || errors.Is(err, ErrIndeterminate) {
		return reply, err // no response came back, so there is none to lose
	}
	if c.n.takeCallLoss(c.local, target, method) {
		return nil, lostOnce(addr, method)
	}
	rv := c.n.decide(KindCall, target, c.local, false)
	if rv.lost != "" {
		return nil, indeterminate("fault", addr, method, fmt.Errorf("%w: response %s", ErrFaultInjected, rv.lost))
	}
	if !sleep(ctx, nil, rv.delay) {
		return nil, indeterminate("fault", addr, method, ctx.Err())
	}
	return reply, err
}
