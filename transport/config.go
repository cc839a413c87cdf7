package transport

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults applied by Listen to zero Config fields.
const (
	DefaultMaxFrameSize     = 8 << 20 // 8 MiB
	DefaultDialTimeout      = 5 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultFrameTimeout     = 10 * time.Second
	DefaultCallTimeout      = 10 * time.Second
	DefaultMaxInflight      = 256
)

// Config configures one member's listener. Only BindAddr is required.
type Config struct {
	// BindAddr is the host:port to listen on ("127.0.0.1:0" picks a port).
	BindAddr string

	// AdvertiseAddr is the host:port peers dial to reach this member; it must
	// be concrete (not 0.0.0.0, not port 0). Empty means the listener's
	// actual address, which must then itself be concrete.
	AdvertiseAddr string

	// ID is this member's ID. With TLS its certificate must name it (a URI
	// SAN jobraft://member/<ID>, see MemberURI), or Listen fails with
	// ErrTLSConfig; empty means whatever member the certificate names.
	ID string

	// TLS enables mutual TLS for every channel when non-nil. It must carry a
	// certificate (Certificates, GetCertificate or GetClientCertificate) used
	// both as server and as client certificate, and a CA pool (RootCAs and/or
	// ClientCAs; one is used for the other when missing) that peers are
	// verified against. Listen clones it and enforces ClientAuth =
	// RequireAndVerifyClientCert and MinVersion >= TLS 1.2; InsecureSkipVerify
	// is refused. When dialing, ServerName defaults to the host of the dialed
	// address, so node certificates need IP SANs (or set ServerName to a name
	// shared by every node certificate). Every certificate must name exactly
	// one member (see MemberURI and docs/transport.md, "Member identity").
	TLS *tls.Config

	// AllowInsecure permits listening without TLS on a non-loopback address.
	// Without it such a Listen fails with ErrInsecureBind. Loopback addresses
	// (127.0.0.0/8, ::1, "localhost") never need it.
	AllowInsecure bool

	// Logger receives line-based logs (connection refusals with their reason,
	// lengths; never payload bytes). Nil means hclog.NewNullLogger().
	Logger hclog.Logger

	// MaxFrameSize bounds every RPC frame in both directions (request and
	// reply, including the small header). Default DefaultMaxFrameSize.
	MaxFrameSize int

	// DialTimeout bounds TCP connect for RPC and raft dials when the caller
	// gives no shorter bound. Default DefaultDialTimeout.
	DialTimeout time.Duration

	// HandshakeTimeout bounds the TLS handshake and the channel header, on
	// both sides. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// FrameTimeout bounds reading the rest of a frame once its first byte has
	// arrived, and writing one frame. Idle connections have no timeout.
	// Default DefaultFrameTimeout.
	FrameTimeout time.Duration

	// CallTimeout applies to a Call whose context has no deadline.
	// Default DefaultCallTimeout.
	CallTimeout time.Duration

	// MaxInflight bounds concurrently running handlers per inbound RPC
	// connection; further requests wait (back-pressure). Default
	// DefaultMaxInflight.
	MaxInflight int
}

// withDefaults validates cfg and returns a copy with defaults applied and the
// TLS configs prepared (server, client). It does not listen.
func (cfg Config) withDefaults() (Config, *tls.Config, *tls.Config, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.MaxFrameSize < 64 {
		cfg.MaxFrameSize = 64
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.TLS == nil {
		if !cfg.AllowInsecure && !IsLoopback(cfg.BindAddr) {
			return cfg, nil, nil, fmt.Errorf("%w: bind %q", ErrInsecureBind, cfg.BindAddr)
		}
		return cfg, nil, nil, nil
	}
	server, client, err := mutualTLS(cfg.TLS)
	if err != nil {
		return cfg, nil, nil, err
	}
	id, err := ownIdentity(cfg.TLS, cfg.ID)
	if err != nil {
		return cfg, nil, nil, err
	}
	if id != "" {
		cfg.ID = id
	}
	return cfg, server, client, nil
}

// mutualTLS derives the server and client configs from the user's config.
func mutualTLS(in *tls.Config) (server, client *tls.Config, err error) {
	if in.InsecureSkipVerify {
		return nil, nil, fmt.Errorf("%w: InsecureSkipVerify is set", ErrTLSConfig)
	}
	if len(in.Certificates) == 0 && in.GetCertificate == nil && in.GetClientCertificate == nil {
		return nil, nil, fmt.Errorf("%w: no certificate", ErrTLSConfig)
	}
	roots, clientCAs := in.RootCAs, in.ClientCAs
	if roots == nil {
		roots = clientCAs
	}
	if clientCAs == nil {
		clientCAs = roots
	}
	if roots == nil {
		return nil, nil, fmt.Errorf("%w: no CA pool (RootCAs or ClientCAs)", ErrTLSConfig)
	}
	server = in.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = clientCAs
	server.RootCAs = roots
	if server.MinVersion < tls.VersionTLS12 {
		server.MinVersion = tls.VersionTLS12
	}
	client = server.Clone()
	return server, client, nil
}

// IsLoopback reports whether the host of addr (host:port) is a loopback IP
// or "localhost": the addresses Listen accepts without TLS unless
// AllowInsecure. Empty and unspecified hosts, other hostnames and malformed
// addresses are not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAdvertise verifies addr is a concrete host:port.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrAdvertiseAddr, addr, err)
	}
	if host == "" || port == "" || port == "0" {
		return fmt.Errorf("%w: %q", ErrAdvertiseAddr, addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: %q is unspecified", ErrAdvertiseAddr, addr)
	}
	return nil
}
