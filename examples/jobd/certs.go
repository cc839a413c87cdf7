package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
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
	if err := verifyMember(cert, pool); err != nil {
		return nil, fmt.Errorf("%w: %s (CA %s): %v", errClusterCert, o.ClusterCert, o.ClusterCA, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// verifyMember checks this member's certificate the way its peers will:
// chained to the cluster CA, currently valid, and usable as TLS server and
// as TLS client (the same certificate is both).
func verifyMember(cert tls.Certificate, roots *x509.CertPool) error {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		inter.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}
		if _, err := leaf.Verify(opts); err != nil {
			return err
		}
	}
	return nil
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

// gencerts writes throwaway certificates for a local cluster: a CA
// (ca.pem) and per name a certificate and key (<name>.pem, <name>-key.pem)
// valid as TLS server and client for the given hosts. For demos and tests
// only: the CA key is not kept.
func gencerts(args []string) error {
	fs := flag.NewFlagSet("jobd gencerts", flag.ContinueOnError)
	dir := fs.String("dir", "", "output directory (required)")
	names := fs.String("names", "", "certificate names, comma-separated (required), e.g. n1,n2,n3,api")
	hosts := fs.String("hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of the SANs")
	valid := fs.Duration("valid", 7*24*time.Hour, "validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *names == "" {
		return errors.New("gencerts: -dir and -names are required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "jobd throwaway CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(*valid), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writePEM(filepath.Join(*dir, "ca.pem"), "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	var ips []net.IP
	var dns []string
	for _, h := range strings.Split(*hosts, ",") {
		if ip := net.ParseIP(strings.TrimSpace(h)); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, strings.TrimSpace(h))
		}
	}
	for _, name := range strings.Split(*names, ",") {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(*valid),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(*dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(*dir, name+"-key.pem"), "PRIVATE KEY", kb, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
