package raft

import (
	"context"

	"github.com/jobraft/jobraft/transport"
)

// memberCaller is the node's transport.Caller. Under TLS the transport
// verifies that a called server's certificate names the member the caller
// expects (transport.ExpectPeer); calls that name none — a status request
// by address, the stale-index repair's request to the leader — expect the
// member the latest configuration places at the address they dial. An
// address outside the configuration (a member not yet added) is only
// required to present a certificate naming some member. Forwarding to the
// leader expects the leader raft knows, whose identity its requests proved.
type memberCaller struct {
	n     *Node
	inner transport.Caller
}

var _ transport.Caller = memberCaller{}

// Call implements transport.Caller.
func (c memberCaller) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	if _, set := transport.ExpectedPeer(ctx); !set {
		if id := c.n.memberAt(addr); id != "" {
			ctx = transport.ExpectPeer(ctx, id)
		}
	}
	return c.inner.Call(ctx, addr, method, req)
}

// memberAt returns the ID of the member the latest configuration places at
// addr, or "". hashicorp/raft answers GetConfiguration from a copy, without
// its main loop.
func (n *Node) memberAt(addr string) string {
	r := n.raft.Load()
	if r == nil {
		return ""
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}
