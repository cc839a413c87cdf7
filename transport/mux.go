package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Mux is one member's listener, multiplexing the raft channel and the RPC
// channel on one TCP port, plus the client side of both. It is safe for
// concurrent use. Create it with Listen and release it with Close.
type Mux struct {
	cfg       Config
	log       hclog.Logger
	ln        net.Listener
	advertise string
	serverTLS *tls.Config
	clientTLS *tls.Config

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
	raft   *streamLayer
	peers  map[string]*peerSlot

	hmu      sync.RWMutex
	handlers map[string]Handler

	nextID uint64 // guarded by mu

	targets     targetBook    // address → member raft sends to there (BindTargets)
	idIn, idOut atomic.Uint64 // identity refusals (IdentityStats)
}

// Listen binds cfg.BindAddr and starts accepting connections. It refuses a
// non-loopback bind without TLS unless cfg.AllowInsecure (ErrInsecureBind), an
// unusable TLS config (ErrTLSConfig) and an undialable advertise address
// (ErrAdvertiseAddr).
func Listen(cfg Config) (*Mux, error) {
	cfg, serverTLS, clientTLS, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %q: %w", cfg.BindAddr, err)
	}
	advertise := cfg.AdvertiseAddr
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := checkAdvertise(advertise); err != nil {
		_ = ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mux{
		cfg:       cfg,
		log:       cfg.Logger,
		ln:        ln,
		advertise: advertise,
		serverTLS: serverTLS,
		clientTLS: clientTLS,
		ctx:       ctx,
		cancel:    cancel,
		conns:     make(map[*trackedConn]struct{}),
		peers:     make(map[string]*peerSlot),
		handlers:  make(map[string]Handler),
	}
	m.log.Info("listening", "bind", ln.Addr().String(), "advertise", advertise, "tls", serverTLS != nil, "member", cfg.ID)
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr returns the advertised address: what peers (and raft) dial.
func (m *Mux) Addr() string { return m.advertise }

// ListenAddr returns the actual bound address.
func (m *Mux) ListenAddr() net.Addr { return m.ln.Addr() }

// Close stops the listener, closes every connection (raft and RPC, inbound and
// outbound), fails pending calls (ErrIndeterminate if written, else
// ErrNotDelivered) and waits for running handlers to return. Handlers see
// their context canceled. Close is idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	err := m.ln.Close()
	conns := make([]*trackedConn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	peers := make([]*peerSlot, 0, len(m.peers))
	for _, s := range m.peers {
		peers = append(peers, s)
	}
	sl := m.raft
	m.mu.Unlock()

	if sl != nil {
		_ = sl.Close()
	}
	for _, s := range peers {
		s.closeAll(ErrClosed)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	// Handlers are canceled only after their connections are gone, so a
	// caller waiting on one sees a lost connection (indeterminate), not an
	// error reply caused by our shutdown.
	m.cancel()
	m.wg.Wait()
	m.log.Info("closed", "advertise", m.advertise)
	return err
}

// spawn runs fn in a goroutine Close waits for, unless the Mux is closed.
func (m *Mux) spawn(fn func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
	return true
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var delay time.Duration
	for {
		raw, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.log.Error("accept failed", "error", err, "retry_in", delay)
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		c, ok := m.track(raw)
		if !ok {
			continue
		}
		if !m.spawn(func() { m.serveConn(c) }) {
			_ = c.Close()
		}
	}
}

// serveConn runs the accept-side handshake (TLS, channel header, ack) and
// hands the connection to its channel.
func (m *Mux) serveConn(tc *trackedConn) {
	remote := tc.RemoteAddr().String()
	// refuse logs why, then closes: whoever sees the connection end can
	// already read the reason.
	refuse := func(reason string, err error) {
		defer tc.Close()
		if m.isClosed() {
			// Our own Close ended the handshake: nothing to warn about.
			m.log.Debug("closing inbound connection at shutdown", "remote", remote, "reason", reason)
			return
		}
		m.log.Warn("closing inbound connection", "remote", remote, "reason", reason, "error", err)
	}
	_ = tc.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	if m.serverTLS != nil {
		tlsConn := tls.Server(tc.Conn, m.serverTLS)
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.HandshakeTimeout)
		err := tlsConn.HandshakeContext(ctx)
		cancel()
		if err != nil {
			refuse("tls handshake failed", err)
			return
		}
		tc.setConn(tlsConn)
		leaf := tlsConn.ConnectionState().PeerCertificates[0]
		id, err := CertIdentity(leaf)
		if err != nil {
			m.idIn.Add(1)
			refuse("no member identity", err)
			return
		}
		tc.setPeer(id, leaf)
	}
	var hdr [headerLen]byte
	if _, err := io.ReadFull(tc, hdr[:]); err != nil {
		refuse("no channel header", err)
		return
	}
	ch, err := decodeHeader(hdr)
	if err != nil {
		refuse("bad channel header", err)
		return
	}
	var sl *streamLayer
	if ch == channelRaft {
		m.mu.Lock()
		sl = m.raft
		m.mu.Unlock()
		if sl == nil || sl.isClosed() {
			refuse("raft channel not open", nil)
			return
		}
	}
	ack := encodeHeader(ch)
	if _, err := tc.Write(ack[:]); err != nil {
		refuse("channel ack failed", err)
		return
	}
	_ = tc.SetDeadline(time.Time{})
	switch ch {
	case channelRaft:
		sl.deliver(tc)
	case channelRPC:
		m.serveRPC(tc)
	}
}

// dial opens a connection to addr for channel: TCP connect (bounded by
// DialTimeout and ctx), TLS handshake, identity check, header, and the
// server's ack. With TLS the server's certificate must name a member, and
// member want unless want is "". Any error means nothing beyond the
// handshake reached the peer; op names the failing step ("dial" or
// "handshake").
func (m *Mux) dial(ctx context.Context, addr string, channel byte, want string) (*trackedConn, string, error) {
	if m.isClosed() {
		return nil, "dial", ErrClosed
	}
	d := net.Dialer{Timeout: m.cfg.DialTimeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, "dial", err
	}
	tc, ok := m.track(raw)
	if !ok {
		return nil, "dial", ErrClosed
	}
	fail := func(err error) (*trackedConn, string, error) {
		_ = tc.Close()
		return nil, "handshake", err
	}
	hctx, cancel := context.WithTimeout(ctx, m.cfg.HandshakeTimeout)
	defer cancel()
	deadline, _ := hctx.Deadline()
	_ = tc.SetDeadline(deadline)
	stop := context.AfterFunc(hctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if m.clientTLS != nil {
		cfg := m.clientTLS
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return fail(err)
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tlsConn := tls.Client(raw, cfg)
		if err := tlsConn.HandshakeContext(hctx); err != nil {
			return fail(fmt.Errorf("tls: %w", err))
		}
		tc.setConn(tlsConn)
		leaf := tlsConn.ConnectionState().PeerCertificates[0]
		id, err := CertIdentity(leaf)
		if err == nil && want != "" && id != want {
			err = fmt.Errorf("%w: expected member %q at %s, its certificate names %q", ErrWrongMember, clip(want), addr, clip(id))
		}
		if err != nil {
			m.refuseServer(addr, want, err)
			return fail(err)
		}
		tc.setPeer(id, leaf)
	}
	hdr := encodeHeader(channel)
	if _, err := tc.Write(hdr[:]); err != nil {
		return fail(fmt.Errorf("write channel header: %w", err))
	}
	// The ack proves the peer accepted us (with TLS 1.3 a rejected client
	// certificate only shows up here) and is serving this channel.
	var ack [headerLen]byte
	if _, err := io.ReadFull(tc, ack[:]); err != nil {
		if ctxErr := hctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return fail(fmt.Errorf("read channel ack: %w", err))
	}
	if ack != hdr {
		return fail(fmt.Errorf("%w: bad ack", ErrBadHeader))
	}
	if !stop() {
		return fail(hctx.Err())
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, "", nil
}

// trackedConn is a connection the Mux closes on Close. Its Conn is the raw
// TCP connection until a TLS handshake replaces it.
type trackedConn struct {
	net.Conn          // what the owner reads and writes (TLS once handshaken)
	raw      net.Conn // the TCP connection; closing it ends Conn too
	m        *Mux
	once     sync.Once
	done     chan struct{} // closed by Close

	raftInbound bool // guarded by m.mu; closed with the raft stream layer

	// With TLS, set once after the handshake, before the connection is
	// shared: the member the peer's certificate names, and the certificate.
	peerID string
	leaf   *x509.Certificate
}

func (m *Mux) track(c net.Conn) (*trackedConn, bool) {
	tc := &trackedConn{Conn: c, raw: c, m: m, done: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = c.Close()
		return nil, false
	}
	m.conns[tc] = struct{}{}
	return tc, true
}

// setConn swaps in the TLS connection; only called by the goroutine that owns
// the handshake, before the connection is shared. Close uses raw, so a
// concurrent Mux.Close does not race with it.
func (c *trackedConn) setConn(n net.Conn) { c.Conn = n }

// setPeer records the peer's verified identity; same rules as setConn.
func (c *trackedConn) setPeer(id string, leaf *x509.Certificate) { c.peerID, c.leaf = id, leaf }

func (c *trackedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.raw.Close()
		c.m.mu.Lock()
		delete(c.m.conns, c)
		c.m.mu.Unlock()
		close(c.done)
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
