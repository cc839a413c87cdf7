package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// server is jobd's HTTP API over one Controller.
type server struct {
	ctl         *jobraft.Controller
	member      string
	tokenSum    [32]byte
	maxBody     int64
	readTimeout time.Duration
	m           *metrics
	log         hclog.Logger
	clusterTLS  *tls.Config  // client side of the members' mTLS (walcompare), nil without
	compare     lastCompare  // the last walcompare run (API or console), for the console
	clusterID   string       // the data dir's cluster (recorded in backups)
	adds        memberAdds   // adds started through this API (api_members.go)
	served      *servedKinds // unserved queues and kinds (unserved.go); nil: none observed
}

func newServer(ctl *jobraft.Controller, member, token string, o options, m *metrics, log hclog.Logger, clusterTLS *tls.Config) *server {
	return &server{ctl: ctl, member: member, tokenSum: sha256.Sum256([]byte(token)), maxBody: o.MaxBody,
		readTimeout: o.ReadTimeout, m: m, log: log, clusterTLS: clusterTLS}
}

// openPaths are the probes: no token needed.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// handler returns the routes. /healthz and /readyz are open (probes); every
// other route, /metrics included, requires the bearer token, checked before
// any of the body is read. A path without a route is 404, a route with
// another method 405 with an Allow header.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern, advice string, h func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, s.auth(s.instrument(pattern, advice, h)))
	}
	api("POST /v1/jobs", adviceSubmit, s.submit)
	api("POST /v1/jobs/batch", adviceSubmit, s.submitBatch)
	api("GET /v1/jobs", "", s.list)
	api("GET /v1/jobs/{id}", "", s.get)
	api("POST /v1/jobs/{id}/cancel", adviceCancel, s.cancel)
	api("POST /v1/jobs/{id}/retry", adviceRetry, s.retry)
	api("POST /v1/jobs/{id}/ack", adviceSettle, s.ack)
	api("POST /v1/jobs/{id}/nak", adviceSettle, s.nak)
	api("POST /v1/jobs/{id}/extend", adviceExtend, s.extend)
	api("POST /v1/jobs/{id}/term", adviceSettle, s.term)
	api("POST /v1/claim", adviceClaim, s.claim)
	api("POST /v1/batches", adviceSubmit, s.createBatch)
	api("GET /v1/batches", "", s.listBatches)
	api("GET /v1/batches/{id}", "", s.getBatch)
	api("GET /v1/jobs/{id}/dependents", "", s.dependents)
	api("GET /v1/stats", "", s.stats)
	api("GET /v1/watch", "", s.watch)
	api("GET /v1/cluster/status", "", s.clusterStatus)
	api("GET /v1/cluster/walcompare", "", s.walcompare)
	api("GET /v1/cluster/backup", "", s.backup)
	api("POST /v1/queues/{queue}/pause", adviceOther, s.pauseQueue)
	api("POST /v1/queues/{queue}/resume", adviceOther, s.resumeQueue)
	api("POST /v1/schedules", adviceSchedule, s.createSchedule)
	api("GET /v1/schedules", "", s.listSchedules)
	api("GET /v1/schedules/{id}", "", s.getSchedule)
	api("POST /v1/schedules/{id}/pause", adviceSchedule, s.pauseSchedule)
	api("POST /v1/schedules/{id}/resume", adviceSchedule, s.resumeSchedule)
	api("DELETE /v1/schedules/{id}", adviceSchedule, s.deleteSchedule)
	api("POST /v1/queues/{queue}/limit", adviceOther, s.setLimit) // api_limits.go
	api("DELETE /v1/queues/{queue}/limit", adviceOther, s.clearLimit)
	api("POST /v1/queues/{queue}/rate", adviceOther, s.setRate)
	api("DELETE /v1/queues/{queue}/rate", adviceOther, s.clearRate)
	api("GET /v1/limits", "", s.limits)
	api("GET /v1/cluster/members", "", s.listMembers)
	api("POST /v1/cluster/members", adviceOther, s.addMember)
	api("DELETE /v1/cluster/members/{id}", adviceOther, s.removeMember)
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	// The web console (console.go): its own login and session cookie. "/"
	// is not an API route: it leads a browser to the console (its login
	// form without a session), never to a 401.
	newConsole(s).routes(mux)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	return boundBody(s.readTimeout, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		if !openPaths[r.URL.Path] && !s.authorized(w, r) {
			return
		}
		dropBody(w, r) // no route reads it
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s is not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	}))
}

// allowed lists the methods that have a route for r's path.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := mux.Handler(r2); pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

// auth refuses requests without the bearer token (401).
func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// authorized checks the bearer token and answers 401 if it is missing or
// wrong. The comparison is constant-time over SHA-256 sums, so neither
// content nor length leaks. A refused request's body is never read: the
// connection is closed after the reply instead.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	sum := sha256.Sum256([]byte(tok))
	if ok && subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="jobd"`)
	dropBody(w, r)
	reason := "missing bearer token (Authorization: Bearer <token>)"
	if ok {
		reason = "invalid bearer token"
	}
	writeError(w, http.StatusUnauthorized, "unauthorized", reason)
	return false
}

// instrument bounds the body, runs h, turns its error into a JSON reply
// (advice: what a caller does about an unknown outcome of this route) and
// counts the request.
func (s *server) instrument(route, advice string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		if err := h(sw, r); err != nil {
			code, kind, reason := classify(err, advice)
			reason = nameLeaders(reason, s.ctl.Node().Status().Members)
			if code >= 500 {
				s.log.Warn("request failed", "route", route, "code", code, "error", err)
			}
			var ce *clientError
			var mbe *http.MaxBytesError
			if errors.As(err, &ce) && ce.close || errors.As(err, &mbe) {
				dropBody(sw, r)
			}
			writeError(sw, code, kind, reason)
		}
		method, path, _ := strings.Cut(route, " ")
		s.m.requests.WithLabelValues(method, path, fmt.Sprint(sw.code)).Inc()
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

// Unwrap gives http.ResponseController the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeError(w http.ResponseWriter, code int, kind, reason string) {
	writeJSON(w, code, client.ErrorReply{Error: kind, Reason: reason})
}

// writeTimeout bounds writing one reply (or one watch event): a client
// that stops reading does not hold its connection for ever.
const writeTimeout = 30 * time.Second

func writeJSON(w http.ResponseWriter, code int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "member": s.member})
}

// readyz: ready when the member knows a leader, has not diverged from it,
// its log has not failed, it was not removed, and it has applied up to the
// leader's commit index (read now: a member catching up knows a commit
// index of its own far behind, or 0).
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	st := selfStatus(r.Context(), s.ctl.Node())
	switch {
	case st.LogFailed != "":
		writeError(w, http.StatusServiceUnavailable, "log_failed", fmt.Sprintf("the log failed closed (%s); restart this member on a healthy disk", st.LogFailed))
	case st.Removed != nil:
		writeError(w, http.StatusServiceUnavailable, "removed", "this member was removed from the cluster; it takes no further part (jobd exits)")
	case st.LeaderID == "":
		writeError(w, http.StatusServiceUnavailable, "not_ready", "no leader known")
	case st.Diverged != nil:
		writeError(w, http.StatusServiceUnavailable, "diverged", divergedReason(*st.Diverged, st.Members))
	case !st.Ready && st.LeaderCommitIndex == 0:
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("the leader's commit index could not be read within %v (no quorum?)", readyReadTimeout))
	case !st.Ready:
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("catching up: applied %d of the leader's commit index %d (%d behind)",
			st.AppliedIndex, st.LeaderCommitIndex, st.LeaderCommitIndex-min(st.AppliedIndex, st.LeaderCommitIndex)))
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "member": s.member, "leader": st.LeaderID, "applied": st.AppliedIndex})
	}
}
