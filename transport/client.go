package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ClientConfig configures a Client. Zero fields take the Config defaults.
type ClientConfig struct {
	// TLS enables mutual TLS when non-nil: it must carry the client
	// certificate, naming a member as every certificate must (MemberURI),
	// and the cluster CA (RootCAs or ClientCAs), as Config.TLS.
	// Nil dials in plaintext (members listening without TLS).
	TLS *tls.Config
	// Logger receives connection failures (never payload bytes).
	Logger hclog.Logger
	// MaxFrameSize bounds request and reply frames; it must not be below
	// the members' (replies above it fail the call as ErrIndeterminate).
	MaxFrameSize     int
	DialTimeout      time.Duration
	HandshakeTimeout time.Duration
	FrameTimeout     time.Duration
	CallTimeout      time.Duration
}

// Client is the client side of the RPC layer without a listener: for tools
// (walcompare, operators' scripts) that call members but serve nothing. It
// uses the same dialing, framing, pooling and error classes as Mux.Call.
// It is safe for concurrent use; Close releases its connections.
type Client struct {
	m *Mux
}

var _ Caller = (*Client)(nil)

// NewClient returns a Client. It fails only on an unusable TLS config
// (ErrTLSConfig, also when the certificate names no member).
func NewClient(cfg ClientConfig) (*Client, error) {
	full, _, clientTLS, err := Config{
		// The client binds nothing; a loopback placeholder passes the
		// insecure-bind check, which is about listening.
		BindAddr: "127.0.0.1:0", TLS: cfg.TLS, Logger: cfg.Logger,
		MaxFrameSize: cfg.MaxFrameSize, DialTimeout: cfg.DialTimeout,
		HandshakeTimeout: cfg.HandshakeTimeout, FrameTimeout: cfg.FrameTimeout,
		CallTimeout: cfg.CallTimeout,
	}.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mux{
		cfg:       full,
		log:       full.Logger,
		advertise: "client",
		clientTLS: clientTLS,
		ctx:       ctx,
		cancel:    cancel,
		conns:     make(map[*trackedConn]struct{}),
		peers:     make(map[string]*peerSlot),
		handlers:  make(map[string]Handler),
	}
	return &Client{m: m}, nil
}

// Call implements Caller, exactly as Mux.Call.
func (c *Client) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	return c.m.Call(ctx, addr, method, req)
}

// Close closes every connection and fails pending calls (ErrIndeterminate
// if written, else ErrNotDelivered). It is idempotent.
func (c *Client) Close() error {
	m := c.m
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	conns := make([]*trackedConn, 0, len(m.conns))
	for tc := range m.conns {
		conns = append(conns, tc)
	}
	peers := make([]*peerSlot, 0, len(m.peers))
	for _, s := range m.peers {
		peers = append(peers, s)
	}
	m.mu.Unlock()
	for _, s := range peers {
		s.closeAll(ErrClosed)
	}
	for _, tc := range conns {
		_ = tc.Close()
	}
	m.cancel()
	m.wg.Wait()
	return nil
}

// String names the client in logs.
func (c *Client) String() string {
	return fmt.Sprintf("transport.Client(tls=%v)", c.m.clientTLS != nil)
}
