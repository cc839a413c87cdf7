package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jobraft/jobraft/examples/client"
)

// TestConsoleInBrowser drives the web console of a live 3-member cluster
// in headless Chromium: "/" leads to the login form; it logs in with the
// token (which never appears in a URL; the cookie is HttpOnly and
// SameSite=Strict), loads every page, checks that user data is escaped,
// lists jobs newest first and pages both ways, finds a job by ID and by
// kind and key, shows a result as text (a <script> in it stays text) and a
// binary payload as hex, clicks cancel and retry and sees the job's state
// change (also through the API), bulk-cancels and bulk-retries selected
// jobs with each job's outcome shown (a refused one says why), pauses and
// resumes a queue and runs walcompare. Screenshots of each page are kept
// (see newBrowser).
func TestConsoleInBrowser(t *testing.T) {
	bin := needChromium(t)
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
		{ID: "binary-1", Queue: "blobs", Kind: "store", Payload: []byte{0, 1, 2, 0xff, 0xfe}},
	}
	for i := range 6 {
		jobs = append(jobs, client.SubmitRequest{ID: fmt.Sprintf("echo-%d", i), Queue: "default", Kind: "echo", Payload: []byte("hi")})
	}
	for i := range 60 { // more than a page
		jobs = append(jobs, client.SubmitRequest{ID: fmt.Sprintf("bulk-%02d", i), Queue: "many", Kind: "n"})
	}
	if _, err := lc.SubmitBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Submit(ctx, client.SubmitRequest{ID: "report-7", Queue: "reports", Kind: "render",
		IdempotencyKey: "report-2026-11", MaxAttempts: 1, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	deadJob(t, lc, "reports", "report-7")
	evil := `<script>document.title="pwned"</script>`
	if _, err := lc.Submit(ctx, client.SubmitRequest{ID: "rendered-1", Queue: "pages", Kind: "html"}); err != nil {
		t.Fatal(err)
	}
	ackWith(t, lc, "pages", "rendered-1", []byte(evil))

	b := newBrowser(t, bin, "http://"+c.Members[leader].HTTPAddr, c.Token)
	b.login()
	base := b.base
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly || cookies.Cookies[0].SameSite != network.CookieSameSiteStrict ||
		strings.Contains(cookies.Cookies[0].Value, c.Token) {
		t.Fatalf("session cookie: %+v", cookies.Cookies)
	}
	b.wantText(`tr[data-queue="emails"] a[data-state="pending"]`, "4")
	b.wantText(`tr[data-queue="reports"] a[data-state="dead"]`, "1")
	b.waitJS("the live stream connects and draws the charts", `window.jobdLive && window.jobdLive.open &&
		document.querySelector("#chart-throughput").getAttribute("data-points") > 0`, 30*time.Second)
	b.shot("queues")

	// Jobs by state, newest first; user data escaped.
	b.do(chromedp.Navigate(base+"/console/jobs?queue=emails&state=pending"), chromedp.WaitVisible(chromedp.ID("jobs")))
	if n := b.count(`#jobs tr.job`); n != 4 {
		t.Errorf("emails pending: %d rows, want 4", n)
	}
	if n := b.count(`#xss`); n != 0 {
		t.Errorf("a job's kind was rendered as HTML")
	}
	b.wantText(`tr.job[data-id="cancel-me"] td:nth-child(3)`, `<b id="xss">bold</b>`)
	// One batch, one log time: newest first is then the latest submitted.
	if got := b.rowIDs(); strings.Join(got, " ") != "cancel-me digest-9 welcome-2 welcome-1" {
		t.Errorf("emails pending, newest first: %v", got)
	}
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

	// Paging both ways: 60 jobs are 50 and 10.
	b.do(chromedp.Navigate(base+"/console/jobs?queue=many"), chromedp.WaitVisible(chromedp.ID("jobs")))
	first := b.rowIDs()
	if len(first) != jobsPageSize || first[0] != "bulk-59" || b.count("#newer-page") != 0 {
		t.Fatalf("first page: %d rows from %v, newer link %d", len(first), first[:1], b.count("#newer-page"))
	}
	b.submit(chromedp.Click(chromedp.ID("older-page")))
	if got := b.rowIDs(); len(got) != 10 || got[0] != "bulk-09" || got[9] != "bulk-00" || b.count("#older-page") != 0 {
		t.Fatalf("second page: %v, older link %d", got, b.count("#older-page"))
	}
	b.submit(chromedp.Click(chromedp.ID("newer-page")))
	if got := b.rowIDs(); strings.Join(got, " ") != strings.Join(first, " ") {
		t.Fatalf("back to the newer page: %v, want %v", got, first)
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
	b.wantText("#payload-note", "20 bytes, shown as text (UTF-8)")

	// A result with a <script> in it is text; a binary payload is hex.
	b.do(chromedp.Navigate(base+"/console/job?id=rendered-1"), chromedp.WaitVisible(chromedp.ID("show-result")))
	b.wantText("#result-size", fmt.Sprintf("%d bytes · show result", len(evil)))
	b.submit(chromedp.Click(chromedp.ID("show-result")))
	b.wantText("#result", evil)
	b.wantText("#result-note", fmt.Sprintf("%d bytes, shown as text (UTF-8)", len(evil)))
	if n := b.count("#result script"); n != 0 {
		t.Error("the result was rendered as HTML")
	}
	if title := b.eval("document.title"); title == "pwned" {
		t.Error("a script in a job's result ran")
	}
	b.shot("job-result")
	b.do(chromedp.Navigate(base+"/console/job?id=binary-1&payload=1"), chromedp.WaitVisible(chromedp.ID("payload")))
	b.wantText("#payload", "000102fffe")
	b.wantText("#payload-note", "5 bytes, shown as hex (not UTF-8)")

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

	// Bulk: cancel two pending jobs, then retry one of them with a job
	// that is pending (refused: it says why).
	b.do(chromedp.Navigate(base+"/console/jobs?queue=emails&state=pending"), chromedp.WaitVisible(chromedp.ID("jobs")))
	b.pick("welcome-1", "welcome-2")
	b.wantText("#selected-count", "2 selected")
	b.submit(chromedp.Click(chromedp.ID("bulk-cancel")))
	b.wantText("h1", "Bulk cancel: 2 done, 0 refused")
	b.wantText(`tr.outcome[data-id="welcome-1"] td:nth-child(2)`, "cancel done: now canceled")
	b.wantAPIState(lc, "welcome-1", "canceled")
	b.wantAPIState(lc, "welcome-2", "canceled")
	b.submit(chromedp.Click(chromedp.ID("back")))
	b.do(chromedp.Navigate(base+"/console/jobs?queue=emails"), chromedp.WaitVisible(chromedp.ID("jobs")))
	b.pick("welcome-1", "digest-9")
	b.submit(chromedp.Click(chromedp.ID("bulk-retry")))
	b.wantText("h1", "Bulk retry: 1 done, 1 refused")
	b.wantText(`tr.outcome[data-id="welcome-1"] td:nth-child(2)`, "retry done: now pending")
	b.wantText(`tr.outcome[data-id="digest-9"] td:nth-child(2)`, "refused (invalid_state)")
	if why := b.text(`tr.outcome[data-id="digest-9"] td:nth-child(3)`); !strings.Contains(why, `cannot retry pending job "digest-9"`) {
		t.Errorf("refused retry's reason: %q", why)
	}
	b.shot("bulk-retry")
	b.wantAPIState(lc, "welcome-1", "pending")
	b.wantAPIState(lc, "welcome-2", "canceled")
	b.wantAPIState(lc, "digest-9", "pending")

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

	// The cluster: every member up, and a walcompare.
	b.do(chromedp.Navigate(base+"/console/cluster"), chromedp.WaitVisible(chromedp.ID("members")))
	if n := b.count(`#members tr.member[data-up="true"]`); n != 3 {
		t.Errorf("%d members up, want 3", n)
	}
	b.wantText(fmt.Sprintf("#member-%s td:nth-child(4)", c.Members[leader].ID), "Leader")
	b.wantText("#quorum-line", "3 of 3 voters reachable from this member (a quorum needs 2).")
	if b.count("#quorum-banner:not([hidden])") != 0 {
		t.Error("a quorum banner with every member up")
	}
	b.submit(chromedp.Click(chromedp.ID("walcompare")))
	if got := b.text("#compare-result"); !strings.HasPrefix(got, "0 committed divergences") {
		t.Errorf("walcompare: %q", got)
	}
	b.shot("cluster")
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

// ackWith claims id from queue and acks it with result.
func ackWith(t *testing.T, cl *client.Client, queue, id string, result []byte) {
	t.Helper()
	ctx := context.Background()
	leases, err := cl.Claim(ctx, client.ClaimRequest{Queues: []string{queue}, Worker: "test-worker", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].Job.ID != id {
		t.Fatalf("claim: %d leases, want job %s", len(leases), id)
	}
	if err := cl.Ack(ctx, id, leases[0].Token, result); err != nil {
		t.Fatal(err)
	}
}
