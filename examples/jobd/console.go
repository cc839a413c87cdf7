package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
)

// The web console: server-rendered pages (html/template, which escapes
// every value by its context: job IDs, kinds, keys, queue names and errors
// are user data) over the same Controller as the API. It is behind the
// same token: the login form checks it and sets a session cookie
// (HttpOnly, SameSite=Strict, Secure over TLS) carrying an expiry and an
// HMAC keyed by the token, so every member with the token accepts it and
// the token itself never leaves the form's POST body. Every POST carries a
// CSRF field derived from the session (and a cross-origin Origin header is
// refused). Pages send a strict Content-Security-Policy: scripts and styles
// only from /console/static.

//go:embed console
var consoleFiles embed.FS

const (
	sessionCookie = "jobd_console"
	sessionTTL    = 12 * time.Hour
	csrfField     = "csrf"
)

// console serves the pages; one per server.
type console struct {
	s     *server
	key   []byte // HMAC key for sessions and CSRF fields
	pages map[string]*template.Template
	feed  *eventFeed
	cmp   *lastCompare
	// healthC: the cluster's health (quorum, members), shared by pages and
	// live streams (console_health.go).
	healthC healthCache
}

func newConsole(s *server) *console {
	mac := hmac.New(sha256.New, s.tokenSum[:])
	mac.Write([]byte("jobd console session key v1"))
	c := &console{s: s, key: mac.Sum(nil), pages: map[string]*template.Template{}, feed: newEventFeed(), cmp: &s.compare}
	c.feed.runAt = func(id string) (time.Time, bool) {
		j, err := s.ctl.Get(context.Background(), id, jobraft.Local)
		return j.RunAt, err == nil
	}
	for _, p := range []string{"login", "queues", "jobs", "job", "cluster", "error", "bulk", "batches", "schedules"} {
		c.pages[p] = template.Must(template.New("layout.html").Funcs(consoleFuncs).
			ParseFS(consoleFiles, "console/layout.html", "console/"+p+".html"))
	}
	go c.feed.run(s.ctl)
	return c
}

// routes adds the console's routes to mux.
func (c *console) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(consoleFiles, "console/static")
	files := http.StripPrefix("/console/static/", http.FileServerFS(static))
	mux.Handle("GET /console/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // files only, no listings
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/queues", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.post(c.logout))
	mux.HandleFunc("GET /console/queues", c.get(c.queuesPage))
	mux.HandleFunc("POST /console/queues/pause", c.post(c.pause))
	mux.HandleFunc("POST /console/queues/resume", c.post(c.resume))
	mux.HandleFunc("GET /console/live", c.live)
	mux.HandleFunc("GET /console/jobs", c.get(c.jobsPage))
	mux.HandleFunc("POST /console/jobs/bulk", c.post(c.bulk))
	mux.HandleFunc("GET /console/job", c.get(c.jobPage))
	mux.HandleFunc("GET /console/batches", c.get(c.batchesPage))
	mux.HandleFunc("POST /console/job/retry", c.post(c.retry))
	mux.HandleFunc("POST /console/job/cancel", c.post(c.cancel))
	mux.HandleFunc("GET /console/cluster", c.get(c.clusterPage))
	mux.HandleFunc("POST /console/cluster/walcompare", c.post(c.runCompare))
	mux.HandleFunc("POST /console/cluster/add", c.post(c.addMember))
	mux.HandleFunc("POST /console/cluster/remove", c.post(c.removeMember))
	c.scheduleRoutes(mux) // console_schedules.go
}

// page is what every page's template gets.
type page struct {
	Title  string
	Nav    string // active navigation entry
	CSRF   string
	Member string
	Role   string
	Leader string
	Flash  string // result of the last action (from the redirect's query)
	// Health is the cluster's health if known fresh (the quorum banner);
	// nil: the live stream fills the banner in.
	Health *clusterHealth
	// Live is the page's live stream ("" none) and LiveQuery its filter:
	// console.js subscribes to /console/live?page=Live&LiveQuery.
	Live      string
	LiveQuery string
	Data      any
}

// session returns the session cookie's value if it is valid and unexpired.
func (c *console) session(r *http.Request) (string, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	exp, sig, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return "", false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > n {
		return "", false
	}
	want := c.sign("session|" + exp)
	return ck.Value, subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

func (c *console) sign(s string) string {
	mac := hmac.New(sha256.New, c.key)
	mac.Write([]byte(s))
	return hex.EncodeToString(mac.Sum(nil))
}

func (c *console) csrf(session string) string { return c.sign("csrf|" + session)[:32] }

// get wraps a page handler: no session redirects to the login form.
func (c *console) get(h func(http.ResponseWriter, *http.Request, *page) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.session(r)
		if !ok {
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		p := c.newPage(r, sess)
		if err := h(w, r, p); err != nil {
			c.fail(w, p, err)
		}
	}
}

// post wraps an action: it needs a session, a same-origin request and the
// session's CSRF field; it answers with a redirect (303) or an error page.
func (c *console) post(h func(http.ResponseWriter, *http.Request, *page) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.session(r)
		if !ok {
			dropBody(w, r)
			c.fail(w, c.newPage(r, ""), &clientError{code: http.StatusUnauthorized, kind: "unauthorized", reason: "not logged in (or the session expired)"})
			return
		}
		p := c.newPage(r, sess)
		if err := c.checkForm(w, r); err != nil {
			dropBody(w, r)
			c.fail(w, p, err)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get(csrfField)), []byte(p.CSRF)) != 1 {
			c.fail(w, p, &clientError{code: http.StatusForbidden, kind: "csrf", reason: "missing or wrong CSRF field: reload the page and try again"})
			return
		}
		if err := h(w, r, p); err != nil {
			c.fail(w, p, err)
		}
	}
}

// checkForm refuses cross-origin posts and bodies that are not forms, then
// parses the (size-bounded) form.
func (c *console) checkForm(w http.ResponseWriter, r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return &clientError{code: http.StatusForbidden, kind: "cross_origin", reason: "cross-origin form post refused"}
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return &clientError{code: http.StatusUnsupportedMediaType, kind: "unsupported_media_type", reason: "console actions are form posts"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return &clientError{code: http.StatusBadRequest, kind: "bad_request", reason: "unreadable form"}
	}
	return nil
}

func (c *console) newPage(r *http.Request, sess string) *page {
	st := c.s.ctl.Node().Status()
	p := &page{Member: c.s.member, Role: st.Role, Leader: st.LeaderID, Flash: r.URL.Query().Get("done"), Health: c.cachedHealth()}
	if sess != "" {
		p.CSRF = c.csrf(sess)
	}
	return p
}

// render executes a page into a buffer first: a template error is a 500,
// never half a page.
func (c *console) render(w http.ResponseWriter, code int, name string, p *page) {
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.s.log.Error("console template", "page", name, "error", err)
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: Chromium then sends "Origin: null" on form posts
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with the API's classification of err.
func (c *console) fail(w http.ResponseWriter, p *page, err error) {
	code, kind, reason := classify(err, "")
	reason = nameLeaders(reason, c.s.ctl.Node().Status().Members)
	if code >= 500 {
		c.s.log.Warn("console request failed", "code", code, "error", err)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code, kind, reason = http.StatusRequestEntityTooLarge, "too_large", "form too large"
	}
	p.Title = "Error"
	p.Data = map[string]any{"Code": code, "Kind": kind, "Reason": reason}
	c.render(w, code, "error", p)
}

// done redirects (303) after an action, with its result for the flash line.
func done(w http.ResponseWriter, r *http.Request, to string, q url.Values, msg string) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("done", msg)
	http.Redirect(w, r, to+"?"+q.Encode(), http.StatusSeeOther)
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(r, "")
	p.Title = "Log in"
	p.Data = map[string]any{"Next": safeNext(r.URL.Query().Get("next"))}
	c.render(w, http.StatusOK, "login", p)
}

// login checks the token from the form (constant time, as the API does)
// and sets the session cookie.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(r, "")
	if err := c.checkForm(w, r); err != nil {
		dropBody(w, r)
		c.fail(w, p, err)
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("token")))
	next := safeNext(r.PostForm.Get("next"))
	if subtle.ConstantTimeCompare(sum[:], c.s.tokenSum[:]) != 1 {
		p.Title = "Log in"
		p.Data = map[string]any{"Next": next, "Error": "wrong token"}
		c.render(w, http.StatusUnauthorized, "login", p)
		return
	}
	exp := strconv.FormatInt(time.Now().Add(sessionTTL).Unix(), 10)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: exp + "." + c.sign("session|"+exp), Path: "/console/",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request, _ *page) error {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-login redirect on the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/console/queues"
	}
	return next
}

// consoleFuncs are the templates' helpers.
var consoleFuncs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format("2006-01-02 15:04:05.000"), time.Since(t).Round(time.Millisecond))
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"pct": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) },
}

// consoleHost is the host:port a browser on this machine reaches the
// listener at: an unspecified listen address (0.0.0.0, ::) is localhost.
func consoleHost(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
