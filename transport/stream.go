package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftOptions configures the raft.NetworkTransport built by Mux.RaftTransport.
type RaftOptions struct {
	// MaxPool is the number of idle connections kept per peer. Default 3.
	MaxPool int
	// Timeout is the I/O deadline of each raft RPC (scaled up for snapshot
	// installs by hashicorp/raft). Default 10s.
	Timeout time.Duration
	// MaxRPCsInFlight is passed to hashicorp/raft (0 = its default, 2).
	MaxRPCsInFlight int
	// Logger for the raft transport; nil means the Mux logger named "raft-net".
	Logger hclog.Logger
	// ServerAddressProvider is passed to hashicorp/raft (optional).
	ServerAddressProvider raft.ServerAddressProvider
}

// RaftTransport returns a hashicorp/raft NetworkTransport speaking over this
// Mux's raft channel: inbound raft connections arrive through the shared
// listener, outbound ones are dialed with the same TLS policy. It supports
// pre-vote (raft.WithPreVote), Close (raft.WithClose) and pipelining. Its
// LocalAddr is the Mux's advertised address. Only one raft transport per Mux
// (ErrRaftTransportExists); until it exists, and after it is closed, inbound
// raft connections are refused. Closing it does not close the Mux.
func (m *Mux) RaftTransport(opts RaftOptions) (*raft.NetworkTransport, error) {
	if opts.MaxPool <= 0 {
		opts.MaxPool = 3
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = m.log.Named("raft-net")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if m.raft != nil {
		m.mu.Unlock()
		return nil, ErrRaftTransportExists
	}
	sl := &streamLayer{
		m:      m,
		ch:     make(chan net.Conn),
		closed: make(chan struct{}),
	}
	m.raft = sl
	m.mu.Unlock()
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: opts.ServerAddressProvider,
		Logger:                opts.Logger,
		Stream:                sl,
		MaxPool:               opts.MaxPool,
		MaxRPCsInFlight:       opts.MaxRPCsInFlight,
		Timeout:               opts.Timeout,
	}), nil
}

// streamLayer is the raft.StreamLayer over the Mux's raft channel.
type streamLayer struct {
	m      *Mux
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once

	quiet bool // guarded by m.mu: QuiesceRaft began, new connections are refused
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// deliver hands an accepted, handshaken raft connection to Accept, or closes
// it if the layer is closed. With TLS raft reads it through a gate that
// checks every request's sender against the peer's certificate.
func (s *streamLayer) deliver(c *trackedConn) {
	s.m.mu.Lock()
	quiet := s.quiet
	c.raftInbound = !quiet
	s.m.mu.Unlock()
	if quiet {
		_ = c.Close() // raft never saw it: nothing to answer
		return
	}
	var conn net.Conn = c
	if c.leaf != nil {
		conn = newRaftGate(s.m, c)
	}
	select {
	case s.ch <- conn:
	case <-s.closed:
		_ = c.Close()
	}
}

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.ch:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops accepting raft connections and
// closes those accepted so far. The Mux keeps running.
func (s *streamLayer) Close() error {
	s.once.Do(func() {
		close(s.closed)
		var conns []*trackedConn
		s.m.mu.Lock()
		for c := range s.m.conns {
			if c.raftInbound {
				conns = append(conns, c)
			}
		}
		s.m.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return nil
}

// QuiesceRaft ends inbound raft traffic while raft still runs, so that
// raft's Shutdown finds no request it received and left unanswered. Call it
// right before raft.Shutdown; raft keeps sending (and receiving answers)
// meanwhile.
//
// Why: hashicorp/raft stops its goroutines first and closes its transport
// after. A request that arrives in between (a heartbeat, an append) is
// decoded and then never answered, and the transport's connection handler
// logs "failed to decode incoming command ... transport shutdown" as an
// ERROR when the transport closes; a handler still waiting for the next
// request logs "use of closed network connection". Whether either happens
// depends on where a request is at that instant, so a graceful stop logged
// errors now and then, more often on a loaded machine.
//
// QuiesceRaft refuses new inbound raft connections, shuts the read side of
// the accepted ones (a handler waiting between requests reads io.EOF and
// ends quietly; one handling a request answers it, since raft still runs,
// and then reads io.EOF), and waits until every handler has ended and
// closed its connection, or ctx is done. Outbound raft connections are
// untouched. The Mux keeps serving its RPC channel.
func (m *Mux) QuiesceRaft(ctx context.Context) {
	m.mu.Lock()
	s := m.raft
	var conns []*trackedConn
	if s != nil {
		s.quiet = true
		for c := range m.conns {
			if c.raftInbound {
				conns = append(conns, c)
			}
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		if cr, ok := c.raw.(interface{ CloseRead() error }); ok {
			_ = cr.CloseRead()
		} else {
			_ = c.Close()
		}
	}
	for _, c := range conns {
		select {
		case <-c.done:
		case <-ctx.Done():
			return
		}
	}
}

func (s *streamLayer) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Addr implements net.Listener: the advertised address.
func (s *streamLayer) Addr() net.Addr { return advertiseAddr(s.m.advertise) }

// Dial implements raft.StreamLayer: TCP, TLS (if configured), channel
// header. With TLS the server's certificate must name the member raft last
// sent to at address (BindTargets); an address no request named is not
// dialed at all (ErrUnboundTarget).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	want := ""
	if s.m.clientTLS != nil {
		if want = s.m.targets.lookup(string(address)); want == "" {
			err := fmt.Errorf("%w: %s", ErrUnboundTarget, address)
			s.m.refuseServer(string(address), "", err)
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: advertiseAddr(address), Err: err}
		}
	}
	ctx := s.m.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c, op, err := s.m.dial(ctx, string(address), channelRaft, want)
	if err != nil {
		var oe *net.OpError
		if op == "dial" && errors.As(err, &oe) {
			return nil, err // the TCP connect's own error: it names the op and address already
		}
		return nil, &net.OpError{Op: op, Net: "tcp", Addr: advertiseAddr(address), Err: err}
	}
	if want != "" {
		return &boundConn{trackedConn: c, addr: string(address), id: want}, nil
	}
	return c, nil
}

// advertiseAddr is a net.Addr for a host:port string that may hold a name.
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }
