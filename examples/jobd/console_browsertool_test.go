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

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jobraft/jobraft/examples/client"
)

// screenshots: where the browser tests write a PNG of each page they
// check (JOBD_CONSOLE_SCREENSHOTS works too); by default
// $TMPDIR/jobd-console-screenshots/<test>, logged. The tests always take
// them: they are the console's test artifacts (CI keeps the directory).
var screenshots = flag.String("console-screenshots", os.Getenv("JOBD_CONSOLE_SCREENSHOTS"), "directory for the console tests' screenshots")

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

// needChromium skips (or, under JOBD_REQUIRE_CHROMIUM, fails) a browser
// test without a browser, loudly.
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromium()
	if bin == "" {
		msg := "!!! NO CHROMIUM: the web console's browser test did not run. Install Debian's chromium " +
			"(apt-get install -y chromium) or set JOBD_CHROMIUM to a Chrome binary."
		if os.Getenv("JOBD_REQUIRE_CHROMIUM") != "" {
			t.Fatal(msg + " (JOBD_REQUIRE_CHROMIUM is set: the test must run here)")
		}
		t.Skip(msg)
	}
	return bin
}

// newBrowser starts headless Chromium on a console at base; it accepts
// every confirmation dialog.
func newBrowser(t *testing.T, bin, base, token string) *browser {
	t.Helper()
	ctx := context.Background()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	bctx, cancelTimeout := context.WithTimeout(bctx, 4*time.Minute)
	t.Cleanup(cancelTimeout)
	dialogs := chromedp.Events(bctx, cdppage.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(bctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	dir := *screenshots
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "jobd-console-screenshots")
	}
	dir = filepath.Join(dir, t.Name())
	t.Logf("screenshots: %s", dir)
	return &browser{t: t, ctx: bctx, base: base, token: token, shots: dir}
}

// login opens "/" (which leads to the console's login form), logs in with
// the token and lands on the queues page.
func (b *browser) login() {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc := b.location(); !strings.HasPrefix(loc, b.base+"/console/login?next=") {
		b.t.Fatalf("GET / led to %s, want the console's login form", loc)
	}
	b.do(chromedp.SendKeys(chromedp.ID("token"), b.token))
	b.submit(chromedp.Click(chromedp.ID("login")))
	b.do(chromedp.WaitVisible(chromedp.ID("self-member")))
	if loc := b.location(); loc != b.base+"/console/queues" {
		b.t.Fatalf("after the login: %s, want the queues page", loc)
	}
}

func (b *browser) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

// waitJS polls a JavaScript condition until it holds (deadline: d).
func (b *browser) waitJS(what, cond string, d time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](cond))
		if err == nil && v {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
			b.t.Fatalf("%s: not within %v (last error %v)\npage: %s", what, d, err, body)
		}
		<-tick.C
	}
}

// markPage sets a marker on the page; samePage says it is still there
// (the page was updated in place, not reloaded).
func (b *browser) markPage() {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("window.jobdSamePage = true")); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) samePage() {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("window.jobdSamePage === true"))
	if err != nil || !v {
		b.t.Fatalf("the page was reloaded (or left): the update was to come in place (%v)", err)
	}
}

// browser runs chromedp actions and fails the test on errors.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	token string
	shots string // the screenshots' directory
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

// shot writes the page as name.png in the test's screenshot directory.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// rowIDs lists the jobs table's job IDs, top to bottom.
func (b *browser) rowIDs() []string {
	b.t.Helper()
	ids, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#jobs tr.job")).map(function (r) { return r.getAttribute("data-id"); })`))
	if err != nil {
		b.t.Fatal(err)
	}
	return ids
}

// pick ticks the jobs' checkboxes on the jobs page.
func (b *browser) pick(ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.job[data-id=%q] input.pick`, id))))
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}
