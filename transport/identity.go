package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"

	"github.com/hashicorp/raft"
)

// Member identity: which member a certificate speaks for.
//
// With TLS every certificate, a member's and a tool's alike, names exactly
// one member ID in a URI SAN jobraft://member/<id>. The CA vouches for that
// binding; the transport enforces it:
//
//   - inbound, a connection whose client certificate names no member is
//     closed before the channel ack; every raft request on it must carry
//     RPCHeader.ID = that member and an RPCHeader.Addr whose host the
//     certificate is valid for, or the connection is closed before raft
//     sees the request; every RPC handler learns the caller (PeerID);
//   - outbound, a raft dial to address A verifies that the server's
//     certificate names the member raft is sending to at A (BindTargets),
//     and a Call verifies the member the caller expects (ExpectPeer), or at
//     least that the server's certificate names a member.
//
// Without TLS nothing is authenticated and nothing is checked.

const (
	identityScheme = "jobraft"
	identityHost   = "member"
)

// MemberURI returns the URI SAN naming member id: jobraft://member/<id>,
// the id path-escaped. An issuer puts exactly one into each certificate
// (x509.Certificate.URIs); CertIdentity reads it back.
func MemberURI(id string) *url.URL {
	return &url.URL{Scheme: identityScheme, Host: identityHost, Path: "/" + id}
}

// CertIdentity returns the member cert names: the id of its one
// jobraft://member/<id> URI SAN. Other URI SANs, the subject and the DNS
// and IP SANs play no part. It fails with ErrNoIdentity when cert has no
// such URI, more than one, or a malformed one (empty id, another host, a
// user, query or fragment).
func CertIdentity(cert *x509.Certificate) (string, error) {
	var ids []string
	for _, u := range cert.URIs {
		if u.Scheme != identityScheme {
			continue
		}
		if u.Host != identityHost || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
			len(u.Path) < 2 || u.Path[0] != '/' {
			return "", fmt.Errorf("%w: malformed URI SAN %q", ErrNoIdentity, clip(u.String()))
		}
		ids = append(ids, u.Path[1:])
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%w: no %s://%s/<id> URI SAN", ErrNoIdentity, identityScheme, identityHost)
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("%w: %d member URI SANs", ErrNoIdentity, len(ids))
	}
}

type peerKey struct{}
type expectKey struct{}

// PeerID returns the member whose RPC a Handler is serving: the one its
// TLS client certificate names. ok is false without TLS (a plaintext peer is
// not authenticated) and outside a Handler.
func PeerID(ctx context.Context) (id string, ok bool) {
	id, ok = ctx.Value(peerKey{}).(string)
	return id, ok
}

// ExpectPeer returns ctx carrying the member a Call must reach. With TLS,
// the Call is refused (ErrNotDelivered, matching ErrWrongMember) unless the
// server's certificate names id; without ExpectPeer a Call accepts any
// server whose certificate names a member. Without TLS it has no effect.
func ExpectPeer(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, expectKey{}, id)
}

// ExpectedPeer returns the member ExpectPeer put into ctx, if any.
func ExpectedPeer(ctx context.Context) (id string, ok bool) {
	id, ok = ctx.Value(expectKey{}).(string)
	return id, ok
}

// checkClaim decides whether a raft request whose header is h may come
// from the peer whose certificate is leaf, naming member id: h.ID must be
// id, and h.Addr a host:port whose host leaf is valid for — what a dialer
// verifies when it dials that address. serverName is the fixed ServerName
// of this member's TLS config: when set, certificates are verified against
// that one name instead of the dialed host, so the claimed host is not
// checked.
func checkClaim(h raft.RPCHeader, id string, leaf *x509.Certificate, serverName string) error {
	if string(h.ID) != id {
		return fmt.Errorf("%w: request claims member %q, certificate names %q", ErrWrongMember, clip(string(h.ID)), clip(id))
	}
	host, _, err := net.SplitHostPort(string(h.Addr))
	if err != nil {
		return fmt.Errorf("%w: request claims address %q: %v", ErrWrongMember, clip(string(h.Addr)), err)
	}
	if serverName == "" {
		if err := leaf.VerifyHostname(host); err != nil {
			return fmt.Errorf("%w: request claims address %q: %v", ErrWrongMember, clip(string(h.Addr)), err)
		}
	}
	return nil
}

// ownIdentity returns the member the certificate of cfg names, and checks
// it is want (unless want is ""). A config that supplies its certificate
// through a callback cannot be checked here: "" and nil (peers still check
// it on every connection).
func ownIdentity(cfg *tls.Config, want string) (string, error) {
	if len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return "", nil
	}
	leaf := cfg.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cfg.Certificates[0].Certificate[0]); err != nil {
			return "", fmt.Errorf("%w: own certificate: %v", ErrTLSConfig, err)
		}
	}
	id, err := CertIdentity(leaf)
	if err != nil {
		return "", fmt.Errorf("%w: own certificate: %w", ErrTLSConfig, err)
	}
	if want != "" && id != want {
		return "", fmt.Errorf("%w: own certificate names member %q, this member is %q: %w", ErrTLSConfig, clip(id), clip(want), ErrWrongMember)
	}
	return id, nil
}

// IdentityStats counts identity refusals since Listen (or NewClient).
type IdentityStats struct {
	// Inbound: connections closed because the client certificate names no
	// member, or a raft request on them claimed another member or address.
	Inbound uint64 `json:"inbound"`
	// Outbound: dials and calls refused because the server's certificate
	// names no member or another member than the one expected.
	Outbound uint64 `json:"outbound"`
}

// IdentityStats returns the identity refusals counted so far.
func (m *Mux) IdentityStats() IdentityStats {
	return IdentityStats{Inbound: m.idIn.Load(), Outbound: m.idOut.Load()}
}

// refuseServer counts and logs an outbound identity refusal.
func (m *Mux) refuseServer(addr, want string, err error) {
	m.idOut.Add(1)
	m.log.Warn("refusing server", "addr", addr, "expected_member", want, "reason", "identity", "error", err)
}

// clip bounds a peer-supplied name in logs and errors.
func clip(s string) string {
	const limit = 128
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
