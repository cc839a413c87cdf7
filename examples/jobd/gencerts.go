package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobraft/jobraft/transport"
)

// The files of gencerts' CA in its -dir.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem" // 0600
)

// errCA: gencerts refused to touch the directory's CA (it exists without
// its key, or its key without it, or they do not belong together, or it
// expired) or a certificate it would replace.
var errCA = errors.New("gencerts")

// gencerts writes throwaway certificates for a local cluster: per name a
// certificate and key (<name>.pem, <name>-key.pem) valid as TLS server and
// client for the given hosts, issued by the directory's CA. Each name is a
// member ID: its certificate names that member (URI SAN
// jobraft://member/<name>), which peers hold the member to. The first run
// creates the CA (ca.pem, and its key ca-key.pem, mode 0600); later runs
// issue certificates for new names (members added to the cluster) from it
// and never replace it, nor an existing certificate: a new CA would leave
// every running member's certificate unverifiable. A CA without its key
// (or a key without its CA) is refused, and nothing is written. For demos
// and tests only.
func gencerts(args []string) error {
	fs := flag.NewFlagSet("jobd gencerts", flag.ContinueOnError)
	dir := fs.String("dir", "", "output directory (required); its ca.pem and ca-key.pem, if there, issue the new certificates")
	names := fs.String("names", "", "certificate names = member IDs, comma-separated (required), e.g. n1,n2,n3,api")
	hosts := fs.String("hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of the SANs")
	valid := fs.Duration("valid", 7*24*time.Hour, "validity of the certificates (at most the CA's)")
	caValid := fs.Duration("ca-valid", 365*24*time.Hour, "validity of a new CA")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *names == "" {
		return errors.New("gencerts: -dir and -names are required")
	}
	var list []string
	for _, name := range strings.Split(*names, ",") {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." || name == "ca" {
			return fmt.Errorf("%w: name %q: a member ID (not ca, no path separator)", errCA, name)
		}
		list = append(list, name)
	}
	// Nothing is written before every check passed.
	for _, name := range list {
		for _, f := range []string{name + ".pem", name + "-key.pem"} {
			if _, err := os.Stat(filepath.Join(*dir, f)); err == nil {
				return fmt.Errorf("%w: %s exists: a certificate is never replaced (remove %s and %s to issue a new one for %s)",
					errCA, filepath.Join(*dir, f), name+".pem", name+"-key.pem", name)
			}
		}
	}
	now := time.Now()
	ca, caKey, err := loadCA(*dir, now)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if ca == nil {
		if ca, caKey, err = newCA(*dir, now, *caValid); err != nil {
			return err
		}
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
	notAfter := now.Add(*valid)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter // a certificate cannot outlive its issuer
	}
	for _, name := range list {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: ips, DNSNames: dns, URIs: []*url.URL{transport.MemberURI(name)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(*dir, name+"-key.pem"), "PRIVATE KEY", kb, 0o600); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(*dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loadCA reads dir's CA and its key; nil, nil if neither exists. A CA
// without its key, a key without its CA, a pair that does not belong
// together, or an expired CA is refused.
func loadCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return nil, nil, nil
	case certErr == nil && errors.Is(keyErr, os.ErrNotExist):
		return nil, nil, fmt.Errorf("%w: %s exists without its key %s: certificates cannot be issued from it, and it is never replaced "+
			"(the running members' certificates verify only against it); put its key there, or start a new CA in another -dir "+
			"and give every member a certificate from it", errCA, certPath, keyPath)
	case keyErr == nil && errors.Is(certErr, os.ErrNotExist):
		return nil, nil, fmt.Errorf("%w: %s exists without its certificate %s: restore %s, or remove %s to start a new CA",
			errCA, keyPath, certPath, certPath, keyPath)
	case certErr != nil:
		return nil, nil, fmt.Errorf("%w: %v", errCA, certErr)
	case keyErr != nil:
		return nil, nil, fmt.Errorf("%w: %v", errCA, keyErr)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%w: %s holds no PEM certificate", errCA, certPath)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", errCA, certPath, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, nil, fmt.Errorf("%w: %s holds no PEM private key", errCA, keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", errCA, keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	type equaler interface{ Equal(crypto.PublicKey) bool }
	pub, eq := ca.PublicKey.(equaler)
	if !ok || !eq || !pub.Equal(signer.Public()) {
		return nil, nil, fmt.Errorf("%w: %s is not the key of %s", errCA, keyPath, certPath)
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%w: %s is not a CA certificate", errCA, certPath)
	}
	if now.After(ca.NotAfter) {
		return nil, nil, fmt.Errorf("%w: the CA %s expired at %s: start a new CA in another -dir and give every member a certificate from it",
			errCA, certPath, ca.NotAfter.UTC().Format(time.RFC3339))
	}
	return ca, signer, nil
}

// newCA creates dir's CA: its key first (0600), then its certificate.
func newCA(dir string, now time.Time, valid time.Duration) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "jobd throwaway CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(valid), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, caKeyFile), "PRIVATE KEY", kb, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, caCertFile), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// writePEM writes a new file at path (never over an existing one): to a
// temporary file beside it, fsynced, linked into place, the directory
// fsynced.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s exists: never replaced", errCA, path)
		}
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
