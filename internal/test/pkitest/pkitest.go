// Package pkitest generates throwaway X.509 material for tests: a cluster CA
// and per-node certificates usable both as TLS server and TLS client
// certificates (mutual TLS), as the transport package expects.
//
// Everything is ECDSA P-256, valid from one hour ago for 24 hours, and carries
// the IP SAN 127.0.0.1 (and ::1, "localhost") so loopback tests verify host
// names for real. A node certificate names its member in the URI SAN
// jobraft://member/<name> (transport.MemberURI; built here without importing
// transport, whose own tests use this package). Nothing here is fit for
// production use.
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// Pool holds only Cert; use it as RootCAs and ClientCAs.
	Pool *x509.CertPool
}

var serial atomic.Int64

func nextSerial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serial.Add(1))
}

// NewCA returns a fresh self-signed CA named name. It fails the test on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("pkitest: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"jobraft test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("pkitest: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("pkitest: parse CA certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// MemberURI is the URI SAN naming member id, as transport.MemberURI.
func MemberURI(id string) *url.URL {
	return &url.URL{Scheme: "jobraft", Host: "member", Path: "/" + id}
}

// NodeCert issues a certificate for member name, valid for TLS server and
// client authentication, with SANs 127.0.0.1, ::1, localhost and
// MemberURI(name).
func (ca *CA) NodeCert(t testing.TB, name string) tls.Certificate {
	t.Helper()
	return ca.NodeCertURIs(t, name, MemberURI(name))
}

// NodeCertURIs is NodeCert with exactly the URI SANs given (none, another
// member's, several): for tests of the identity checks.
func (ca *CA) NodeCertURIs(t testing.TB, name string, uris ...*url.URL) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("pkitest: node key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"jobraft test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		URIs:         uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("pkitest: node certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("pkitest: parse node certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// NodeTLS returns a *tls.Config for node name as the transport expects it:
// one certificate used as server and client, peers verified against this CA
// (RootCAs and ClientCAs), client certificates required.
func (ca *CA) NodeTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	return ca.TLS(ca.NodeCert(t, name))
}

// TLS returns a *tls.Config presenting cert, as NodeTLS.
func (ca *CA) TLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.Pool,
		ClientCAs:    ca.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}
