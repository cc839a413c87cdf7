package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeMember is an httptest jobd member whose replies a test scripts per
// request; it records what it received.
type fakeMember struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	reply func(n int, r *http.Request, body map[string]any) (int, any)
}

type recorded struct {
	method, path string
	body         map[string]any
}

func newFake(t *testing.T, reply func(n int, r *http.Request, body map[string]any) (int, any)) *fakeMember {
	f := &fakeMember{reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, body})
		f.mu.Unlock()
		code, out := f.reply(n, r, body)
		if code == 0 { // cut the connection: no reply at all
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeMember) got() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func unknown() (int, any) {
	return 503, map[string]string{"error": "outcome_unknown", "reason": "leadership lost"}
}

func newTestClient(t *testing.T, eps ...string) *Client {
	c, err := New(Config{Endpoints: eps, Token: "t", Backoff: time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A submit without an ID gets one before its first attempt; after an
// unknown outcome (a 503 outcome_unknown, then a cut connection) it is
// resubmitted with that same ID until the outcome is known.
func TestSubmitResubmitsWithTheSameID(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, body map[string]any) (int, any) {
		switch n {
		case 0:
			return unknown()
		case 1:
			return 0, nil
		}
		return 200, map[string]any{"job": map[string]any{"id": body["id"], "state": "pending"}, "duplicate": true}
	})
	c := newTestClient(t, f.srv.URL)
	res, err := c.Submit(testCtx(t), SubmitRequest{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.got()
	if len(reqs) != 3 {
		t.Fatalf("%d attempts, want 3", len(reqs))
	}
	id, _ := reqs[0].body["id"].(string)
	if id == "" {
		t.Fatal("first attempt without an ID")
	}
	for i, r := range reqs {
		if r.body["id"] != id {
			t.Fatalf("attempt %d with ID %v, want %s", i, r.body["id"], id)
		}
	}
	if !res.Retried || !res.Duplicate || res.Job.ID != id {
		t.Fatalf("result %+v", res)
	}
}

// A claim whose outcome is unknown is never sent again (its leases expire
// on their own); neither is one cut mid-request, to any member.
func TestClaimIsNeverResentAfterAnUnknownOutcome(t *testing.T) {
	for name, reply := range map[string]func() (int, any){"503 outcome_unknown": unknown, "connection cut": func() (int, any) { return 0, nil }} {
		t.Run(name, func(t *testing.T) {
			a := newFake(t, func(int, *http.Request, map[string]any) (int, any) { return reply() })
			b := newFake(t, func(int, *http.Request, map[string]any) (int, any) { return 200, map[string]any{"leases": []any{}} })
			c := newTestClient(t, a.srv.URL, b.srv.URL)
			_, err := c.Claim(testCtx(t), ClaimRequest{Queues: []string{"q"}, Worker: "w"})
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("claim: %v, want ErrOutcomeUnknown", err)
			}
			if n := len(a.got()) + len(b.got()); n != 1 {
				t.Fatalf("claim sent %d times, want once", n)
			}
		})
	}
}

// A member that refuses the connection (never reached) or answers
// not_applied (nothing changed) is skipped for the next one, even for a
// claim.
func TestFailoverWhenNothingChanged(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	a := newFake(t, func(int, *http.Request, map[string]any) (int, any) {
		return 503, map[string]string{"error": "not_applied", "reason": "no leader"}
	})
	b := newFake(t, func(int, *http.Request, map[string]any) (int, any) { return 200, map[string]any{"leases": []any{}} })
	c := newTestClient(t, dead, a.srv.URL, b.srv.URL)
	if _, err := c.Claim(testCtx(t), ClaimRequest{Queues: []string{"q"}, Worker: "w"}); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(a.got()) != 1 || len(b.got()) != 1 {
		t.Fatalf("attempts: a %d, b %d; want 1 and 1", len(a.got()), len(b.got()))
	}
}

// A cancel is resent after an unknown outcome; a resend refused because
// the job is canceled already reads the job and succeeds if it is.
func TestCancelSettlesAfterAnUnknownOutcome(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, _ map[string]any) (int, any) {
		switch {
		case n == 0:
			return unknown()
		case r.Method == "POST":
			return 409, map[string]string{"error": "invalid_state", "reason": "job is canceled"}
		}
		return 200, map[string]any{"id": "j1", "state": "canceled"}
	})
	c := newTestClient(t, f.srv.URL)
	j, err := c.Cancel(testCtx(t), "j1", "r")
	if err != nil || j.State != "canceled" {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	reqs := f.got()
	if len(reqs) != 3 || reqs[2].method != "GET" {
		t.Fatalf("requests %+v, want POST, POST, GET", reqs)
	}
	// Without an unknown outcome first, the same refusal is the answer.
	g := newFake(t, func(int, *http.Request, map[string]any) (int, any) {
		return 409, map[string]string{"error": "invalid_state", "reason": "job is canceled"}
	})
	if _, err := newTestClient(t, g.srv.URL).Cancel(testCtx(t), "j1", ""); !errors.Is(err, ErrRefused) || len(g.got()) != 1 {
		t.Fatalf("cancel of a canceled job: %v after %d requests, want ErrRefused after 1", err, len(g.got()))
	}
}

// A retry is never resent: after an unknown outcome the job is read; if it
// is still dead the error stays ErrOutcomeUnknown.
func TestRetryIsNeverResent(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, _ map[string]any) (int, any) {
		if r.Method == "POST" {
			return unknown()
		}
		return 200, map[string]any{"id": "j1", "state": "dead"}
	})
	c := newTestClient(t, f.srv.URL)
	if _, err := c.Retry(testCtx(t), "j1"); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("retry: %v, want ErrOutcomeUnknown", err)
	}
	posts := 0
	for _, r := range f.got() {
		if r.method == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("retry sent %d times, want once", posts)
	}
}

// Errors map to their class by jobd's code.
func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   error
	}{
		{404, "not_found", ErrNotFound}, {400, "bad_request", ErrRefused}, {409, "stale_lease", ErrRefused},
		{401, "unauthorized", ErrUnauthorized}, {503, "outcome_unknown", ErrOutcomeUnknown}, {504, "timeout", ErrOutcomeUnknown},
		{503, "not_submitted", ErrUnavailable}, {503, "closed", ErrUnavailable},
	} {
		f := newFake(t, func(int, *http.Request, map[string]any) (int, any) {
			return tc.status, map[string]string{"error": tc.code, "reason": "x"}
		})
		c, _ := New(Config{Endpoints: []string{f.srv.URL}, Attempts: 1})
		_, err := c.Get(testCtx(t), "j", Linearizable)
		var e *Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code {
			t.Errorf("%d %s: %v, want class %v", tc.status, tc.code, err, tc.want)
		}
	}
}

// A schedule delete resent after an unknown outcome that finds no schedule
// is not a success: the schedule is gone, but whether this call deleted it
// is unknown (another caller may have), so the answer says so.
func TestDeleteScheduleAfterAnUnknownOutcomeIsNotClaimed(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, _ map[string]any) (int, any) {
		if n == 0 {
			return unknown()
		}
		return 404, map[string]string{"error": "schedule_not_found", "reason": "no schedule s1"}
	})
	err := newTestClient(t, f.srv.URL).DeleteSchedule(testCtx(t), "s1")
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrNotFound) || len(f.got()) != 2 {
		t.Fatalf("delete: %v after %d requests, want ErrOutcomeUnknown wrapping ErrNotFound after 2", err, len(f.got()))
	}
	// Without an unknown outcome first, not found is the answer.
	g := newFake(t, func(int, *http.Request, map[string]any) (int, any) {
		return 404, map[string]string{"error": "schedule_not_found", "reason": "no schedule s1"}
	})
	if err := newTestClient(t, g.srv.URL).DeleteSchedule(testCtx(t), "s1"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("delete of no schedule: %v, want ErrNotFound alone", err)
	}
}

// Every resent operation answers the same way: after an unknown outcome, a
// resend's refusal or not-found (which the first attempt may have caused:
// the rate it cleared is gone, the queue it paused is paused) is not given
// as the answer alone, it says the outcome is unknown.
func TestResendAfterAnUnknownOutcomeNeverAnswersARefusalAlone(t *testing.T) {
	f := newFake(t, func(n int, r *http.Request, _ map[string]any) (int, any) {
		if n == 0 {
			return unknown()
		}
		return 404, map[string]string{"error": "not_found", "reason": "no rate for queue q"}
	})
	if _, err := newTestClient(t, f.srv.URL).ClearRate(testCtx(t), "q"); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("clear rate: %v, want ErrOutcomeUnknown joined with ErrNotFound", err)
	}
	g := newFake(t, func(n int, r *http.Request, _ map[string]any) (int, any) {
		if n == 0 {
			return unknown()
		}
		return 409, map[string]string{"error": "invalid_state", "reason": "refused"}
	})
	if err := newTestClient(t, g.srv.URL).Pause(testCtx(t), "q"); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrRefused) {
		t.Fatalf("pause: %v, want ErrOutcomeUnknown joined with ErrRefused", err)
	}
}
