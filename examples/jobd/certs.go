package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/jobraft/jobraft/transport"
)

// clusterTLS loads the members' mutual TLS: this member's certificate (used
// as server and client) and the CA peers are verified against. nil without
// -cluster-ca.
func (o *options) clusterTLS() (*tls.Config, error) {
	if o.ClusterCA == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.ClusterCert, o.ClusterKey)
	if err != nil {
		return nil, fmt.Errorf("cluster certificate: %w", err)
	}
	pem, err := os.ReadFile(o.ClusterCA)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster CA %s: no PEM certificate", o.ClusterCA)
	}
	leaf, err := verifyMember(cert, pool)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (CA %s): %v", errClusterCert, o.ClusterCert, o.ClusterCA, err)
	}
	// Peers accept this member only as the member its certificate names.
	if id, err := transport.CertIdentity(leaf); err != nil || id != o.ID {
		if err == nil {
			err = fmt.Errorf("it names member %q", id)
		}
		return nil, fmt.Errorf("%w: %s must name member %q (URI SAN %s): %v", errCertMember, o.ClusterCert, o.ID, transport.MemberURI(o.ID), err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// verifyMember checks this member's certificate the way its peers will:
// chained to the cluster CA, currently valid, and usable as TLS server and
// as TLS client (the same certificate is both). It returns the leaf.
func verifyMember(cert tls.Certificate, roots *x509.CertPool) (*x509.Certificate, error) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		inter.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, err
		}
	}
	return leaf, nil
}

// apiTLS loads the HTTP API's server certificate; nil without -api-cert.
func (o *options) apiTLS() (*tls.Config, error) {
	if o.APICert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.APICert, o.APIKey)
	if err != nil {
		return nil, fmt.Errorf("API certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
