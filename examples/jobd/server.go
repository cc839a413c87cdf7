package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// server is jobd's HTTP API over one Controller.
type server struct {
	ctl        *jobraft.Controller
	member     string
	tokenSum   [32]byte
	maxBody    int64
	m          *metrics
	log        hclog.Logger
	clusterTLS *tls.Config // client side of the members' mTLS (walcompare), nil without
}

func newServer(ctl *jobraft.Controller, member, token string, maxBody int64, m *metrics, log hclog.Logger, clusterTLS *tls.Config) *server {
	return &server{ctl: ctl, member: member, tokenSum: sha256.Sum256([]byte(token)), maxBody: maxBody, m: m, log: log, clusterTLS: clusterTLS}
}

// handler returns the routes. /healthz and /readyz are open (probes); every
// other route, /metrics included, requires the bearer token.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		route := pattern
		mux.Handle(pattern, s.auth(s.instrument(route, h)))
	}
	api("POST /v1/jobs", s.submit)
	api("POST /v1/jobs/batch", s.submitBatch)
	api("GET /v1/jobs", s.list)
	api("GET /v1/jobs/{id}", s.get)
	api("POST /v1/jobs/{id}/cancel", s.cancel)
	api("POST /v1/jobs/{id}/retry", s.retry)
	api("POST /v1/jobs/{id}/ack", s.ack)
	api("POST /v1/jobs/{id}/nak", s.nak)
	api("POST /v1/jobs/{id}/extend", s.extend)
	api("POST /v1/jobs/{id}/term", s.term)
	api("POST /v1/claim", s.claim)
	api("GET /v1/stats", s.stats)
	api("GET /v1/watch", s.watch)
	api("GET /v1/cluster/status", s.clusterStatus)
	api("GET /v1/cluster/walcompare", s.walcompare)
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("/", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})))
	return mux
}

// auth refuses requests without the bearer token (401). The comparison is
// constant-time over SHA-256 sums, so neither content nor length leaks.
func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(h, "Bearer ")
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="jobd"`)
			reason := "missing bearer token (Authorization: Bearer <token>)"
			if ok {
				reason = "invalid bearer token"
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// instrument bounds the body, runs h, turns its error into a JSON reply and
// counts the request.
func (s *server) instrument(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		if err := h(sw, r); err != nil {
			code, kind, reason := classify(err)
			if code >= 500 {
				s.log.Warn("request failed", "route", route, "code", code, "error", err)
			}
			writeError(sw, code, kind, reason)
		}
		s.m.requests.WithLabelValues(route, fmt.Sprint(sw.code)).Inc()
	})
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// badRequest is a client error found before anything was proposed.
type badRequest struct{ reason string }

func (e *badRequest) Error() string { return e.reason }

func bad(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// classify maps an error to an HTTP status, a machine-readable kind and a
// reason. Every 4xx means nothing changed.
func classify(err error) (int, string, string) {
	var br *badRequest
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body above %d bytes", mbe.Limit)
	case errors.As(err, &br):
		return http.StatusBadRequest, "bad_request", br.reason
	case errors.Is(err, jobraft.ErrInvalidRequest):
		return http.StatusBadRequest, "invalid", err.Error()
	case errors.Is(err, jobraft.ErrNotFound):
		return http.StatusNotFound, "not_found", err.Error()
	case errors.Is(err, jobraft.ErrStaleLease):
		return http.StatusConflict, "stale_lease", err.Error()
	case errors.Is(err, jobraft.ErrInvalidState):
		return http.StatusConflict, "invalid_state", err.Error()
	case errors.Is(err, jobraft.ErrCompacted):
		return http.StatusGone, "compacted", err.Error()
	case errors.Is(err, jobraft.ErrMayExist), errors.Is(err, jobraft.ErrOutcomeUnknown), errors.Is(err, raft.ErrIndeterminate):
		return http.StatusServiceUnavailable, "outcome_unknown", err.Error() + " (retry with the same job ID)"
	case errors.Is(err, jobraft.ErrNotSubmitted):
		return http.StatusServiceUnavailable, "not_submitted", err.Error() + " (nothing was created; retry)"
	case errors.Is(err, jobraft.ErrClosed):
		return http.StatusServiceUnavailable, "closed", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout", err.Error()
	}
	return http.StatusInternalServerError, "internal", err.Error()
}

type errorJSON struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func writeError(w http.ResponseWriter, code int, kind, reason string) {
	writeJSON(w, code, errorJSON{Error: kind, Reason: reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// decode reads exactly one JSON object with known fields only. An empty
// body decodes as {} when allowEmpty.
func decode(r *http.Request, v any, allowEmpty bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return bad("Content-Type must be application/json, not %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err // *http.MaxBytesError: 413
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			return nil
		}
		return bad("empty body: a JSON object is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bad("malformed JSON: %v", err)
	}
	if dec.More() {
		return bad("malformed JSON: trailing data after the object")
	}
	return nil
}

// duration is a JSON duration: "1.5s" or a number of seconds.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("a duration is a string like \"1.5s\" or a number of seconds")
	}
	*d = duration(f * float64(time.Second))
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "member": s.member})
}

// readyz: ready when the member knows a leader, has not diverged from it,
// and has applied up to the commit index it knows.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	st := selfStatus(r.Context(), s.ctl.Node())
	switch {
	case st.LeaderID == "":
		writeError(w, http.StatusServiceUnavailable, "not_ready", "no leader known")
	case st.Diverged != nil:
		writeError(w, http.StatusServiceUnavailable, "diverged", fmt.Sprintf("diverged from leader %s at index %d (local term %d, leader term %d); re-seed this member",
			st.Diverged.Leader, st.Diverged.Index, st.Diverged.LocalTerm, st.Diverged.LeaderTerm))
	case !st.Ready:
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("applied %d of commit %d", st.AppliedIndex, st.CommitIndex))
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "member": s.member, "leader": st.LeaderID, "applied": st.AppliedIndex})
	}
}
