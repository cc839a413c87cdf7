package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// preflighted is the client's HTTP client: before its first request is
// sent, every endpoint is asked for GET /healthz (open: no token). When none
// is a jobd API because of how jobctl was configured (nothing listens
// there, http against https or the reverse, an untrusted certificate,
// another service such as a member's raft port), no request is sent: the
// first fails as a refused dial (the client's ErrUnavailable, nothing
// changed) whose cause, a *preflightError (errEndpoint, exit 7), says what
// each endpoint answered, instead of a write's "outcome unknown" after an
// unreadable reply. An endpoint that is slow or answers otherwise (a member
// failing, 503) is no configuration mistake: requests go on and the
// client's failover and outcome classes apply. The check runs when the
// first request does, after the command checked its arguments.
func preflighted(endpoints []string, tc *tls.Config) *http.Client {
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	base := &http.Transport{
		TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, TLSHandshakeTimeout: 5 * time.Second,
	}
	return &http.Client{Transport: &preflightTransport{base: base, endpoints: endpoints}}
}

// preflightTransport checks the endpoints once, before its first request.
type preflightTransport struct {
	base      *http.Transport
	endpoints []string
	once      sync.Once
	err       error
}

func (p *preflightTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.once.Do(func() { p.err = preflight(r.Context(), p.base, p.endpoints) })
	if p.err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: p.err}
	}
	return p.base.RoundTrip(r)
}

// preflightError is what the endpoints answered (errEndpoint).
type preflightError struct{ found []string }

func (e *preflightError) Error() string {
	return fmt.Sprintf("%v (nothing was sent to jobd):\n  %s", errEndpoint, strings.Join(e.found, "\n  "))
}

func (e *preflightError) Unwrap() error { return errEndpoint }

// preflight probes every endpoint through t: nil when one is (or may be)
// a jobd API, else a *preflightError.
func preflight(ctx context.Context, t *http.Transport, endpoints []string) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: t}
	found := make([]string, len(endpoints)) // "" for a jobd API, or what is wrong
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = probe(ctx, hc, strings.TrimRight(ep, "/"))
		}()
	}
	wg.Wait()
	var wrong []string
	for i, f := range found {
		if f == "" {
			return nil
		}
		wrong = append(wrong, endpoints[i]+": "+f)
	}
	return &preflightError{found: wrong}
}

// notAPI prefixes what probe found when the endpoint is not a jobd API
// through a configuration mistake; any other finding lets the command run.
const notAPI = "not jobd: "

// probe returns "" when ep answers as a jobd API (or may be one: slow,
// failing), else why it is not.
func probe(ctx context.Context, hc *http.Client, ep string) string {
	req, err := http.NewRequestWithContext(ctx, "GET", ep+"/healthz", nil)
	if err != nil {
		return notAPI + err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return whyNot(err, ep)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var h struct{ Status, Member string }
	switch {
	case resp.StatusCode == http.StatusOK && json.Unmarshal(body, &h) == nil && h.Status == "ok" && h.Member != "":
		return ""
	case strings.Contains(string(body), "HTTP request to an HTTPS server"):
		return notAPI + "it speaks https: use " + strings.Replace(ep, "http://", "https://", 1) + " (and -ca with jobd's API CA)"
	case resp.StatusCode/100 == 5:
		return "" // a jobd failing: the command's own error says how
	}
	return notAPI + fmt.Sprintf("GET /healthz answered HTTP %d without jobd's reply: another service? (jobd's API is its -http-addr)", resp.StatusCode)
}

// whyNot reads a failed probe request: a configuration mistake (notAPI)
// or "" (it may be a jobd that is slow: the command runs).
func whyNot(err error, ep string) string {
	var uae x509.UnknownAuthorityError
	var cie x509.CertificateInvalidError
	var hne x509.HostnameError
	var rhe tls.RecordHeaderError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return notAPI + "nothing listens there (is jobd running? its API address is -http-addr, default 127.0.0.1:8400)"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return notAPI + "it speaks http: use " + strings.Replace(ep, "https://", "http://", 1)
	case errors.As(err, &uae), errors.As(err, &cie), errors.As(err, &hne):
		return notAPI + "its certificate is not trusted (" + err.Error() + "): give -ca FILE, the CA of jobd's -api-cert (or it is a member's raft port: jobd's API is its -http-addr)"
	case errors.As(err, &rhe), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		strings.Contains(err.Error(), "malformed HTTP"), strings.Contains(err.Error(), "tls: "):
		return notAPI + "it does not answer as an HTTP API (" + shortErr(err) + "): a member's raft port? jobd's API is its -http-addr"
	}
	return "" // a timeout, an unreachable host: no configuration mistake known
}

// shortErr is err's innermost text.
func shortErr(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
