// Package client is a Go client for jobd's HTTP API (examples/jobd): typed
// requests and replies, typed errors from jobd's error codes, bearer-token
// auth, TLS, and failover across the cluster's members with retries that
// never repeat an operation blindly.
//
// # Retries
//
// A request that was never sent (the member refused the connection) or was
// refused with nothing changed (503 not_submitted, not_applied, closed)
// goes to the next member, whatever it was. Reads are retried on any
// failure. Operations that change state are retried after an unknown
// outcome only where a retry cannot apply them twice:
//
//   - Submit gives every job an ID (NewID when the caller gave none) and
//     resubmits it with the same ID: the job exists at most once, and the
//     reply says whether it existed already.
//   - Cancel resends; a refusal of the resend because the job is canceled
//     already counts as success.
//   - Pause and Resume are idempotent and resent.
//   - Ack, Nak, Extend and Term resend the same request (the token is the
//     fence, and jobd answers 200 to a repeat only when it is the very
//     request that ended the lease, so a 200 is this request's); a refusal
//     of the resend returns ErrOutcomeUnknown (the lease ended, by the
//     first attempt, forgotten since, or otherwise).
//   - Claim and Retry are never resent after an unknown outcome: Claim's
//     leases expire on their own; Retry reads the job and succeeds if it
//     left dead/canceled, else returns ErrOutcomeUnknown.
//
// Errors match exactly one of ErrNotFound, ErrRefused, ErrUnauthorized,
// ErrOutcomeUnknown and ErrUnavailable (errors.Is), or none for a jobd
// bug (HTTP 500) or a local error; *Error has the details.
//
// # Wire format
//
// The request and reply types (wire.go) are the one definition of jobd's
// JSON: jobd serves and decodes these same types, so the two cannot drift.
// Golden replies recorded from a live cluster (examples/jobd/testdata/wire)
// pin the bytes: jobd's TestWireFormatGoldens checks what it serves against
// them, and TestGoldensRoundTrip here decodes each into its type and
// encodes it back unchanged.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Config configures a Client.
type Config struct {
	// Endpoints are the members' API base URLs (http://host:port or
	// https://host:port); requests go to one and fail over to the others.
	Endpoints []string
	// Token is the bearer token (jobd -token-file).
	Token string
	// TLS configures https endpoints (CA, client certificate); nil uses
	// the system roots.
	TLS *tls.Config
	// Timeout bounds each attempt (default 15s); the caller's context
	// bounds the whole call. Long polls and streams are not bounded by it.
	Timeout time.Duration
	// Attempts bounds the attempts of one call (default 2 per endpoint,
	// at least 3).
	Attempts int
	// Backoff is the pause before a retry after a round of every
	// endpoint failed (default 200ms, doubled up to 2s).
	Backoff time.Duration
	// HTTPClient replaces the default client (TLS is then ignored).
	HTTPClient *http.Client
}

// Client talks to a jobd cluster. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	next atomic.Uint32 // the endpoint to try first
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	cfg.Endpoints = append([]string(nil), cfg.Endpoints...) // the caller's slice stays as it is
	for i, e := range cfg.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return nil, fmt.Errorf("jobd: endpoint %q: want http://host:port or https://host:port", e)
		}
		cfg.Endpoints[i] = strings.TrimRight(e, "/")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = max(3, 2*len(cfg.Endpoints))
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	c := &Client{cfg: cfg, http: cfg.HTTPClient}
	if c.http == nil {
		tc := cfg.TLS
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.http = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64, TLSClientConfig: tc,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, TLSHandshakeTimeout: 5 * time.Second,
		}}
	}
	return c, nil
}

// NewID returns a random job ID ("j-" and 24 hex digits), in jobd's ID
// alphabet.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "j-" + hex.EncodeToString(b[:])
}

// call is one API call's shape.
type call struct {
	method, path string
	in           any  // JSON body, or nil
	out          any  // decoded from a 2xx reply, or nil
	mutates      bool // changes state: an unknown outcome is not retried here
	stream       bool // no per-attempt timeout (long poll, stream)
	status       int  // set: the 2xx status
}

// attempt sends c once to endpoint. sent reports whether the request may
// have reached jobd (false: the connection was refused or never made).
func (cl *Client) attempt(ctx context.Context, endpoint string, c *call) (err error) {
	op := c.method + " " + c.path
	var body io.Reader
	if c.in != nil {
		b, err := json.Marshal(c.in)
		if err != nil {
			return fmt.Errorf("jobd: %s: encode: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	if !c.stream {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cl.cfg.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, c.method, endpoint+c.path, body)
	if err != nil {
		return fmt.Errorf("jobd: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+cl.cfg.Token)
	if c.in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return transportError(endpoint, op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return transportError(endpoint, op, err)
	}
	c.status = resp.StatusCode
	if resp.StatusCode/100 != 2 {
		return replyError(endpoint, op, resp.StatusCode, b)
	}
	if c.out != nil {
		if err := json.Unmarshal(b, c.out); err != nil {
			return &Error{Endpoint: endpoint, Op: op, Status: resp.StatusCode, Code: "bad_reply", Reason: err.Error()}
		}
	}
	return nil
}

func replyError(endpoint, op string, status int, b []byte) *Error {
	e := &Error{Endpoint: endpoint, Op: op, Status: status}
	var ej ErrorReply
	if json.Unmarshal(b, &ej) == nil && ej.Error != "" {
		e.Code, e.Reason = ej.Error, ej.Reason
	} else {
		e.Code, e.Reason = http.StatusText(status), strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	e.class = classOf(status, e.Code)
	return e
}

// transportError classifies an error without a reply: a refused or failed
// dial never reached jobd (unavailable); anything else may have.
func transportError(endpoint, op string, err error) *Error {
	e := &Error{Endpoint: endpoint, Op: op, Err: err, class: ErrOutcomeUnknown}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		e.class = ErrUnavailable
	}
	return e
}

// do runs c against the endpoints: the first that answers wins. What is
// retried is in the package doc; do itself never resends a mutating call
// after an unknown outcome.
func (cl *Client) do(ctx context.Context, c *call) error {
	n := len(cl.cfg.Endpoints)
	start := int(cl.next.Load()) % n
	backoff := cl.cfg.Backoff
	var last error
	for i := 0; i < cl.cfg.Attempts; i++ {
		if i > 0 && i%n == 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(last, ctx.Err())
			case <-t.C:
			}
			backoff = min(2*backoff, 2*time.Second)
		}
		k := (start + i) % n
		err := cl.attempt(ctx, cl.cfg.Endpoints[k], c)
		if err == nil {
			cl.next.Store(uint32(k))
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return last
		}
		switch {
		case errors.Is(err, ErrUnavailable):
			// Nothing changed: any call may go on to the next member.
		case errors.Is(err, ErrOutcomeUnknown) && !c.mutates:
			// A read: safe to repeat.
		default:
			return err
		}
		cl.next.Store(uint32((k + 1) % n))
	}
	return last
}
