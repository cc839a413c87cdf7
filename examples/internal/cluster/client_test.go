package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The harness client verifies the API server's certificate against the
// system roots only: a server whose certificate comes from another CA (here
// httptest's own) is refused before any request reaches it.
func TestClientRefusesServerFromUnknownCA(t *testing.T) {
	served := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- struct{}{}
		w.WriteHeader(http.StatusOK)
	}))
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(srv.URL, "token")
	err := c.Do(ctx, "GET", "/v1/stats", nil, nil)
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
	c.HTTP = srv.Client()
	if err := c.Do(ctx, "GET", "/v1/stats", nil, nil); err != nil {
		t.Fatalf("control: %v", err)
	}
}
