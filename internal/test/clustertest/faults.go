package clustertest

import (
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/transport/faultnet"
)

// FaultOptions are the internal options that carry a member's raft traffic
// and RPCs through n (none when n is nil): its Wrap around the raft
// transport, its WrapCaller around the RPC caller.
func FaultOptions(n *faultnet.Network) []nodeopt.Option {
	if n == nil {
		return nil
	}
	return []nodeopt.Option{
		nodeopt.WrapTransport(func(addr string, t hraft.Transport) hraft.Transport {
			return n.Wrap(hraft.ServerAddress(addr), t)
		}),
		nodeopt.WrapCaller(func(addr string, c transport.Caller) transport.Caller { return n.WrapCaller(addr, c) }),
	}
}
