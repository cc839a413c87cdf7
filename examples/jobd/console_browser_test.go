package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jobraft/jobraft/examples/client"
)

// screenshots: where TestConsoleInBrowser writes a PNG of each page
// (JOBD_CONSOLE_SCREENSHOTS works too). The README's images are made with
//
//	cd examples && go test -run TestConsoleInBrowser ./jobd -console-screenshots ../../docs/console
var screenshots = flag.String("console-screenshots", os.Getenv("JOBD_CONSOLE_SCREENSHOTS"), "directory for the console test's screenshots")

// chromium finds a Chromium (or Chrome) binary: $JOBD_CHROMIUM, then the
// usual names on $PATH.
func chromium() string {
	if p := os.Getenv("JOBD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestConsoleInBrowser drives the web console of a live 3-member cluster
// in headless Chromium: it logs in with the token (which never appears in
// a URL; the cookie is HttpOnly and SameSite=Strict), loads every page,
// checks that user data is escaped, finds a job by ID and by kind and key,
// clicks cancel and retry and sees the job's state change (also through
// the API), pauses and resumes a queue, runs walcompare, then SIGKILLs a
// follower and sees the cluster page show it down.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		msg := "!!! NO CHROMIUM: the web console's browser test did not run. Install Debian's chromium " +
			"(apt-get install -y chromium) or set JOBD_CHROMIUM to a Chrome binary."
		if os.Getenv("JOBD_REQUIRE_CHROMIUM") != "" {
			t.Fatal(msg + " (JOBD_REQUIRE_CHROMIUM is set: the test must run here)")
		}
		t.Skip(msg)
	}
	c := liveCluster(t)
	leader := leaderOf(t, c)
	lc := c.Members[leader].Client
	ctx := context.Background()

	// The data the pages show.
	jobs := []client.SubmitRequest{
		{ID: "welcome-1", Queue: "emails", Kind: "send", Payload: []byte("to: ada@example.com")},
		{ID: "welcome-2", Queue: "emails", Kind: "send", Payload: []byte("to: grace@example.com")},
		{ID: "digest-9", Queue: "emails", Kind: "digest", Payload: []byte("weekly")},
		{ID: "cancel-me", Queue: "emails", Kind: `<b id="xss">bold</b>`, Payload: []byte("secret payload bytes")},
	}
	for i := range 6 {
		jobs = append(jobs, client.SubmitRequest{ID: fmt.Sprintf("echo-%d", i), Queue: "default", Kind: "echo", Payload: []byte("hi")})
	}
	if _, err := lc.SubmitBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Submit(ctx, client.SubmitRequest{ID: "report-7", Queue: "reports", Kind: "render",
		IdempotencyKey: "report-2026-11", MaxAttempts: 1, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	deadJob(t, lc, "reports", "report-7")

	// The browser.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelTimeout()
	dialogs := chromedp.Events(bctx, cdppage.JavascriptDialogOpening)
	go func() { // the cancel button asks for a confirmation: accept it
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(bctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	base := "http://" + c.Members[leader].HTTPAddr
	b := &browser{t: t, ctx: bctx, base: base, token: c.Token}

	// Log in: the queues page redirects to the form, which leads back.
	b.do(chromedp.Navigate(base+"/console/queues"), chromedp.WaitVisible(chromedp.ID("token")))
	b.do(chromedp.SendKeys(chromedp.ID("token"), c.Token))
	b.submit(chromedp.Click(chromedp.ID("login")))
	b.do(chromedp.WaitVisible(chromedp.ID("queues")))
	b.checkURL()
	cookies, err := chromedp.Call(bctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly || cookies.Cookies[0].SameSite != network.CookieSameSiteStrict ||
		strings.Contains(cookies.Cookies[0].Value, c.Token) {
		t.Fatalf("session cookie: %+v", cookies.Cookies)
	}
	b.wantText(`tr[data-queue="emails"] a[data-state="pending"]`, "4")
	b.wantText(`tr[data-queue="reports"] a[data-state="dead"]`, "1")
	b.shot("queues")

	// Jobs by state, and the search by kind and key.
	b.do(chromedp.Navigate(base+"/console/jobs?queue=emails&state=pending"), chromedp.WaitVisible(chromedp.ID("jobs")))
	if n := b.count(`#jobs tr.job`); n != 4 {
		t.Errorf("emails pending: %d rows, want 4", n)
	}
	if n := b.count(`#xss`); n != 0 {
		t.Errorf("a job's kind was rendered as HTML")
	}
	b.wantText(`tr.job[data-id="cancel-me"] td:nth-child(2)`, `<b id="xss">bold</b>`)
	b.shot("jobs")
	b.do(chromedp.SendKeys(chromedp.ID("search-kind"), "send"))
	b.submit(chromedp.Click(chromedp.ID("search")))
	if n := b.count(`#jobs tr.job`); n != 2 {
		t.Errorf("kind=send: %d rows, want 2", n)
	}
	b.do(chromedp.Navigate(base+"/console/jobs?queue=reports"), chromedp.WaitVisible(chromedp.ID("search-key")),
		chromedp.SendKeys(chromedp.ID("search-key"), "report-2026-11"))
	b.submit(chromedp.Click(chromedp.ID("search")))
	if n := b.count(`#jobs tr.job`); n != 1 || b.count(`tr.job[data-id="report-7"]`) != 1 {
		t.Errorf("key=report-2026-11: %d rows, want report-7 alone", n)
	}

	// Find by ID, cancel, then retry.
	b.do(chromedp.SendKeys(chromedp.ID("search-id"), "cancel-me"))
	b.submit(chromedp.Submit(chromedp.ID("search-id")))
	b.wantText("#job-id", "cancel-me")
	b.wantText("#job-state", "pending")
	b.wantText("#payload-size", "20 bytes · show payload")
	if n := b.count("#payload"); n != 0 {
		t.Error("the job page shows the payload without being asked")
	}
	b.submit(chromedp.Click(chromedp.ID("cancel")))
	b.wantText("#job-state", "canceled")
	b.wantAPIState(lc, "cancel-me", "canceled")
	b.submit(chromedp.Click(chromedp.ID("retry")))
	b.wantText("#job-state", "pending")
	b.wantText("#flash", "retried: now pending")
	b.wantAPIState(lc, "cancel-me", "pending")
	b.submit(chromedp.Click(chromedp.ID("show-payload")))
	b.wantText("#payload", "secret payload bytes")

	// A dead job: its history tells the attempt and how its lease ended.
	b.do(chromedp.Navigate(base+"/console/job?id=report-7"), chromedp.WaitVisible(chromedp.CSS("#job-state.dead")))
	hist := b.text("#history")
	for _, want := range []string{"1 attempt claimed so far, of at most 1", "ended: termed", "last error: renderer out of memory"} {
		if !strings.Contains(hist, want) {
			t.Errorf("history %q lacks %q", hist, want)
		}
	}
	b.shot("job")
	b.submit(chromedp.Click(chromedp.ID("retry")))
	b.wantText("#job-state", "pending")
	b.wantAPIState(lc, "report-7", "pending")

	// Pause and resume a queue.
	b.do(chromedp.Navigate(base + "/console/queues"))
	b.submit(chromedp.Click(chromedp.CSS(`tr[data-queue="emails"] button.pause`)))
	b.wantText(`tr[data-queue="emails"] .badge`, "paused")
	b.wantPaused(lc, "emails", true)
	b.submit(chromedp.Click(chromedp.CSS(`tr[data-queue="emails"] button.resume`)))
	if b.count(`tr[data-queue="emails"] .badge.paused`) != 0 {
		t.Error("emails still shown paused after resume")
	}
	b.wantPaused(lc, "emails", false)

	// The cluster: every member up, a walcompare, then a follower killed.
	b.do(chromedp.Navigate(base+"/console/cluster"), chromedp.WaitVisible(chromedp.ID("members")))
	if n := b.count(`#members tr.member[data-up="true"]`); n != 3 {
		t.Errorf("%d members up, want 3", n)
	}
	b.wantText(fmt.Sprintf("#member-%s td:nth-child(4)", c.Members[leader].ID), "Leader")
	b.submit(chromedp.Click(chromedp.ID("walcompare")))
	if got := b.text("#compare-result"); !strings.HasPrefix(got, "0 committed divergences") {
		t.Errorf("walcompare: %q", got)
	}
	b.shot("cluster")
	victim := (leader + 1) % 3
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf(`#member-%s[data-up="false"]`, c.Members[victim].ID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Each load asks every member (2 s timeout for a silent one).
		b.do(chromedp.Navigate(base+"/console/cluster"), chromedp.WaitVisible(chromedp.ID("members")))
		if b.count(down) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster page does not show %s down 30 s after SIGKILL", c.Members[victim].ID)
		}
	}
	b.wantText(down+" td.up", "down")
	if n := b.count(`#members tr.member[data-up="true"]`); n != 2 {
		t.Errorf("%d members up after the kill, want 2", n)
	}
	b.shot("cluster-member-down")
}

// deadJob claims id from queue and terms it: dead after its one attempt.
func deadJob(t *testing.T, cl *client.Client, queue, id string) {
	t.Helper()
	ctx := context.Background()
	leases, err := cl.Claim(ctx, client.ClaimRequest{Queues: []string{queue}, Worker: "render-worker-3", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].Job.ID != id {
		t.Fatalf("claim: %d leases, want job %s", len(leases), id)
	}
	if err := cl.Term(ctx, id, leases[0].Token, "renderer out of memory"); err != nil {
		t.Fatal(err)
	}
}

// browser runs chromedp actions and fails the test on errors.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	token string
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
		b.t.Fatalf("browser at %s: %v\npage: %s", loc, err, body)
	}
	b.checkURL()
}

// submit runs steps that leave the page (a click on a form's button) and
// waits until the next page has loaded: a marker set on the old page is
// gone and the new document is complete.
func (b *browser) submit(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("window.jobdOldPage = true")); err != nil {
		b.t.Fatal(err)
	}
	b.do(steps...)
	// Evaluating fails while the old page's context goes away: retry.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.jobdOldPage === undefined && document.readyState === "complete"`))
		if err == nil && v {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no new page within 30 s of the action (last error: %v)", err)
		}
		<-tick.C
	}
	b.checkURL()
}

// checkURL: the token never appears in the browser's address.
func (b *browser) checkURL() {
	b.t.Helper()
	if loc, err := chromedp.Run(b.ctx, chromedp.Location()); err == nil && strings.Contains(loc, b.token) {
		b.t.Fatalf("the token is in the URL %s", loc)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b *browser) wantText(sel, want string) {
	b.t.Helper()
	if got := b.text(sel); got != want {
		b.t.Errorf("%s: %q, want %q", sel, got, want)
	}
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	if err != nil {
		b.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// wantAPIState: the API (a second witness) agrees with the page.
func (b *browser) wantAPIState(cl *client.Client, id, state string) {
	b.t.Helper()
	j, err := cl.Get(context.Background(), id, client.Linearizable)
	if err != nil {
		b.t.Fatal(err)
	}
	if j.State != state {
		b.t.Errorf("API: job %s is %s, want %s", id, j.State, state)
	}
}

func (b *browser) wantPaused(cl *client.Client, queue string, paused bool) {
	b.t.Helper()
	st, err := cl.Stats(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Name == queue && q.Paused != paused {
			b.t.Errorf("API: queue %s paused=%v, want %v", queue, q.Paused, paused)
		}
	}
}

// shot writes the page as name.png when screenshots are asked for.
func (b *browser) shot(name string) {
	b.t.Helper()
	if *screenshots == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
