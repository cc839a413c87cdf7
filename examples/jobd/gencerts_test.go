package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGencertsKeepsTheCA: certificates for n1..n3, then for n4 and n5, in
// the same directory: ca.pem is unchanged, its key is kept beside it (mode
// 0600, like every key), and n4's certificate verifies against it and
// names n4 (so a member started with it is accepted: clusterTLS), as n1's
// still does. An existing certificate is never replaced; a CA without its
// key, or a key without its CA, is refused and nothing is written.
func TestGencertsKeepsTheCA(t *testing.T) {
	dir := t.TempDir()
	if err := gencerts([]string{"-dir", dir, "-names", "n1,n2,n3"}); err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	ca1, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := gencerts([]string{"-dir", dir, "-names", "n4,n5"}); err != nil {
		t.Fatalf("certificates for new members from the existing CA: %v", err)
	}
	ca2, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, ca2) {
		t.Fatal("ca.pem changed: the running members' certificates no longer verify")
	}
	for _, key := range []string{"ca-key.pem", "n1-key.pem", "n4-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", key, fi.Mode().Perm())
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca1) {
		t.Fatal("ca.pem holds no certificate")
	}
	for _, id := range []string{"n1", "n4", "n5"} {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := verifyMember(cert, pool); err != nil {
			t.Errorf("%s's certificate does not verify against the CA: %v", id, err)
		}
		o := options{ID: id, ClusterCA: caPath, ClusterCert: filepath.Join(dir, id+".pem"), ClusterKey: filepath.Join(dir, id+"-key.pem")}
		if _, err := o.clusterTLS(); err != nil {
			t.Errorf("member %s with its certificate: %v", id, err)
		}
	}

	// An existing certificate: refused, unchanged.
	n4, _ := os.ReadFile(filepath.Join(dir, "n4.pem"))
	if err := gencerts([]string{"-dir", dir, "-names", "n6,n4"}); !errors.Is(err, errCA) || !strings.Contains(err.Error(), "n4.pem exists") {
		t.Fatalf("a certificate for n4 again: %v, want errCA naming n4.pem", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "n4.pem")); !bytes.Equal(n4, again) {
		t.Fatal("n4.pem was replaced")
	}
	if _, err := os.Stat(filepath.Join(dir, "n6.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused run wrote n6.pem: %v", err)
	}

	// A CA without its key, a key without its CA: refused, nothing written.
	keyless := t.TempDir()
	if err := os.WriteFile(filepath.Join(keyless, "ca.pem"), ca1, 0o644); err != nil {
		t.Fatal(err)
	}
	err = gencerts([]string{"-dir", keyless, "-names", "n6"})
	if !errors.Is(err, errCA) || !strings.Contains(err.Error(), "without its key") {
		t.Fatalf("a CA without its key: %v, want errCA saying so", err)
	}
	t.Logf("refused: %v", err)
	if got, _ := os.ReadFile(filepath.Join(keyless, "ca.pem")); !bytes.Equal(got, ca1) {
		t.Fatal("ca.pem without its key was replaced")
	}
	if entries, _ := os.ReadDir(keyless); len(entries) != 1 {
		t.Fatalf("a refused run wrote files: %v", entries)
	}
	certless := t.TempDir()
	key, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err := os.WriteFile(filepath.Join(certless, "ca-key.pem"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := gencerts([]string{"-dir", certless, "-names", "n6"}); !errors.Is(err, errCA) || !strings.Contains(err.Error(), "without its certificate") {
		t.Fatalf("a CA key without its certificate: %v, want errCA saying so", err)
	}
	// Another CA's key beside this CA.
	other := t.TempDir()
	if err := gencerts([]string{"-dir", other, "-names", "x"}); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(other, "ca-key.pem"))
	mixed := t.TempDir()
	if err := os.WriteFile(filepath.Join(mixed, "ca.pem"), ca1, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mixed, "ca-key.pem"), otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := gencerts([]string{"-dir", mixed, "-names", "n6"}); !errors.Is(err, errCA) || !strings.Contains(err.Error(), "is not the key of") {
		t.Fatalf("another CA's key: %v, want errCA saying so", err)
	}
}
