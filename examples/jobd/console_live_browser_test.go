package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jobraft/jobraft/examples/client"
)

// TestConsoleLiveInBrowser: the console's pages update in place over the
// live stream (never reloading: a marker set on the page survives) as a
// live 3-member cluster changes. A job submitted through the API appears
// on the queues page (a new queue's row) and at the top of the jobs page;
// a cancel changes its row and its job page; jobs of a kind no worker
// claims get the hint while a served queue does not; a SIGKILLed follower
// turns down on the cluster page (never "caught up"), and with a second
// one killed the leader's console shows the quorum banner, on the cluster
// page and on the next page opened.
func TestConsoleLiveInBrowser(t *testing.T) {
	bin := needChromium(t)
	c := liveCluster(t, "-unserved-after", "3s")
	leader := leaderOf(t, c)
	lc := c.Members[leader].Client
	ctx := context.Background()
	submit := func(id, queue, kind string) {
		t.Helper()
		if _, err := lc.Submit(ctx, client.SubmitRequest{ID: id, Queue: queue, Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, bin, "http://"+c.Members[leader].HTTPAddr, c.Token)
	b.login()
	base := b.base
	b.waitJS("the live stream connects", `window.jobdLive && window.jobdLive.open`, 30*time.Second)

	// The queues page: a new queue's row comes in, then its count moves.
	b.markPage()
	submit("live-1", "live", "nobody")
	b.waitJS("the new queue's row", `(function () { var a = document.querySelector('tr[data-queue="live"] a[data-state="pending"]');
		return a !== null && a.textContent === "1"; })()`, 30*time.Second)
	submit("live-2", "live", "nobody")
	submit("live-3", "live", "nobody")
	b.waitJS("the pending count", `document.querySelector('tr[data-queue="live"] a[data-state="pending"]').textContent === "3"`, 30*time.Second)
	b.samePage()

	// The jobs page: a new job comes in at the top; a cancel changes it.
	b.do(chromedp.Navigate(base+"/console/jobs?queue=live"), chromedp.WaitVisible(chromedp.ID("jobs")))
	b.waitJS("the live stream connects", `window.jobdLive && window.jobdLive.open`, 30*time.Second)
	b.markPage()
	submit("live-4", "live", "nobody")
	b.waitJS("live-4's row at the top", `(function () { var r = document.querySelector("#jobs tbody tr.job");
		return r !== null && r.getAttribute("data-id") === "live-4"; })()`, 30*time.Second)
	if got := b.rowIDs(); strings.Join(got, " ") != "live-4 live-3 live-2 live-1" {
		t.Errorf("rows after live-4 came in: %v", got)
	}
	if _, err := lc.Cancel(ctx, "live-1", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	b.waitJS("live-1 canceled, moved to the top", `(function () { var r = document.querySelector("#jobs tbody tr.job");
		return r.getAttribute("data-id") === "live-1" && r.querySelector("span.state").textContent === "canceled"; })()`, 30*time.Second)
	b.samePage()
	b.shot("jobs-live")

	// The job page: the state and the event table.
	b.do(chromedp.Navigate(base+"/console/job?id=live-3"), chromedp.WaitVisible(chromedp.ID("job-state")))
	b.waitJS("the live stream connects", `window.jobdLive && window.jobdLive.open`, 30*time.Second)
	b.markPage()
	before := b.count("#events tr.event")
	if _, err := lc.Cancel(ctx, "live-3", "by the test"); err != nil {
		t.Fatal(err)
	}
	b.waitJS("live-3 canceled on its page", `document.querySelector("#job-state").textContent === "canceled"`, 30*time.Second)
	b.waitJS("the cancel event in the table", fmt.Sprintf(`document.querySelectorAll("#events tr.event").length === %d`, before+1), 30*time.Second)
	b.wantText("#events tr.event:last-child td:nth-child(3)", "canceled")
	b.samePage()

	// The hint: kind "nobody" is never claimed; the served default queue
	// (jobd's built-in workers) gets none.
	b.do(chromedp.Navigate(base+"/console/queues"), chromedp.WaitVisible(chromedp.ID("queues")))
	submit("echo-1", "default", "echo")
	b.waitJS("the no-worker hint for kind nobody", `(function () { var h = document.querySelector('tr[data-queue="live"] [data-field=hint]');
		return !h.hidden && h.textContent.indexOf("kind nobody: no job of this kind was claimed") === 0; })()`, 90*time.Second)
	if b.count(`tr[data-queue="default"] [data-field=hint]:not([hidden])`) != 0 {
		t.Errorf("a hint on the served default queue: %q", b.text(`tr[data-queue="default"] [data-field=hint]`))
	}
	b.shot("queues-live")

	// The cluster page: a follower killed turns down in place.
	b.do(chromedp.Navigate(base+"/console/cluster"), chromedp.WaitVisible(chromedp.ID("members")))
	b.waitJS("the live stream connects", `window.jobdLive && window.jobdLive.open`, 30*time.Second)
	b.markPage()
	first, second := (leader+1)%3, (leader+2)%3
	if err := c.Kill(first); err != nil {
		t.Fatal(err)
	}
	down := func(i int) string { return fmt.Sprintf(`#member-%s[data-up="false"]`, c.Members[i].ID) }
	b.waitJS("the killed member shown down", fmt.Sprintf(`document.querySelector(%q) !== null`, down(first)), 60*time.Second)
	b.wantText(down(first)+" td.up", "down")
	if got := b.text(down(first) + " [data-field=catchup]"); !strings.HasPrefix(got, "down: ") {
		t.Errorf("the killed member's catch-up column: %q", got)
	}
	b.wantText("#quorum-line", "2 of 3 voters reachable from this member (a quorum needs 2).")
	if b.count("#quorum-banner:not([hidden])") != 0 {
		t.Errorf("a quorum banner with 2 of 3 voters: %q", b.text("#quorum-banner"))
	}
	b.samePage()
	b.shot("cluster-member-down")

	// A second one: this member reaches 1 of 3 voters, the banner says so.
	if err := c.Kill(second); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the quorum banner", `(function () { var b = document.querySelector("#quorum-banner");
		return !b.hidden && b.textContent.indexOf("Quorum lost: this member reaches 1 of 3 voters, a quorum needs 2") === 0; })()`, 60*time.Second)
	b.waitJS("both killed members shown down", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector(%q) !== null`,
		down(first), down(second)), 60*time.Second)
	for _, i := range []int{first, second} {
		if got := b.text(down(i) + " [data-field=catchup]"); !strings.HasPrefix(got, "down: ") {
			t.Errorf("%s's catch-up column with quorum lost: %q", c.Members[i].ID, got)
		}
	}
	b.wantText("#quorum-line", "1 of 3 voters reachable from this member (a quorum needs 2).")
	b.samePage()
	b.shot("cluster-quorum-lost")
	// No row says "caught up" once this member knows no leader (raft's
	// leader lease: it steps down within about a second).
	b.waitJS("no member shown caught up", `Array.from(document.querySelectorAll("#members [data-field=catchup]")).every(function (e) {
		return e.textContent !== "caught up"; })`, 60*time.Second)

	// The next page opened shows the banner too.
	b.do(chromedp.Navigate(base+"/console/queues"), chromedp.WaitVisible(chromedp.ID("queues")))
	b.waitJS("the quorum banner on the queues page", `(function () { var b = document.querySelector("#quorum-banner");
		return !b.hidden && b.textContent.indexOf("Quorum lost") === 0; })()`, 30*time.Second)
	b.shot("queues-quorum-lost")
}
