package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The client verifies the API server's certificate against the system
// roots (or Config.TLS) only: a server whose certificate comes from
// another CA (here httptest's own) is refused before any request reaches
// it.
func TestClientRefusesServerFromUnknownCA(t *testing.T) {
	served := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- struct{}{}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jobs": 0}`))
	}))
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(Config{Endpoints: []string{srv.URL}, Token: "token", Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stats(ctx)
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		t.Fatalf("request to a server from an unknown CA: %v, want a certificate verification error", err)
	}
	select {
	case <-served:
		t.Fatal("the request reached the server")
	default:
	}
	// Control: a client trusting that CA gets through, so the refusal above
	// is the certificate's.
	c, err = New(Config{Endpoints: []string{srv.URL}, Token: "token", TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stats(ctx); err != nil {
		t.Fatalf("control: %v", err)
	}
}
