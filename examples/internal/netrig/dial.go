//go:build linux

package netrig

import (
	"context"
	"net"
)

// Listen listens on addr inside member m's namespace (for probes standing
// in for the member: its raft port's address is hostPort("0.0.0.0",
// RaftPort(m))).
func (r *Rig) Listen(m int, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(r.Namespace(m), func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// Dial connects to addr from inside member m's namespace: to a peer's
// RaftAddr, through m's proxy for that peer.
func (r *Rig) Dial(ctx context.Context, m int, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(r.Namespace(m), func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// RaftListen is the address member m's raft listens on in its namespace:
// every address it has, on its own port.
func (r *Rig) RaftListen(m int) string { return hostPort("0.0.0.0", raftPortBase+m) }
