package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the wire-format goldens in testdata/wire")

// wireDir holds one golden a reply: the reply as jobd wrote it, with its
// volatile values normalised (normalise) and indented. The client's round
// trip test (examples/client) decodes each into the client's type.
const wireDir = "testdata/wire"

// TestWireFormatGoldens is the wire-format regression: a scenario on a live
// three-member cluster (in-process members on loopback, t1 leading) whose
// every reply must equal its golden byte for byte, but for the volatile
// values normalise replaces. -update rewrites the goldens.
func TestWireFormatGoldens(t *testing.T) {
	d, d3, c := wireCluster(t)
	g := &goldens{t: t}
	do := func(name, method, path string, body any, code int) reply {
		t.Helper()
		r := jsonCall(t, c, d, method, path, body)
		if r.code != code {
			t.Fatalf("%s: %s %s: %d %s, want %d", name, method, path, r.code, r.raw, code)
		}
		g.check(name, []byte(r.raw))
		return r
	}
	first := map[string]any{"id": "wire-1", "queue": "wire", "kind": "echo", "payload_text": "hello", "priority": 5,
		"max_attempts": 3, "idempotency_key": "key-1"}
	do("submit", "POST", "/v1/jobs", first, http.StatusCreated)
	do("submit_duplicate", "POST", "/v1/jobs", first, http.StatusOK)
	do("submit_batch", "POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
		{"id": "wire-2", "queue": "wire", "kind": "fail", "payload": []byte{1, 2, 3}},
		{"id": "wire-3", "queue": "wire", "kind": "echo", "delay": "1h"},
	}}, http.StatusOK)
	do("get", "GET", "/v1/jobs/wire-1", nil, http.StatusOK)
	r := do("claim", "POST", "/v1/claim", map[string]any{"queues": []string{"wire"}, "worker": "w1", "max": 2, "lease_ttl": "1m"}, http.StatusOK)
	tokens := map[string]uint64{}
	var claimed struct {
		Leases []struct {
			Job   struct{ ID string }
			Token uint64
		}
	}
	if err := json.Unmarshal([]byte(r.raw), &claimed); err != nil {
		t.Fatal(err)
	}
	for _, l := range claimed.Leases {
		tokens[l.Job.ID] = l.Token
	}
	if len(tokens) != 2 || tokens["wire-1"] == 0 || tokens["wire-2"] == 0 {
		t.Fatalf("claim leased %v, want wire-1 and wire-2", tokens)
	}
	do("list", "GET", "/v1/jobs?queue=wire", nil, http.StatusOK)
	do("list_page", "GET", "/v1/jobs?queue=wire&limit=1", nil, http.StatusOK)
	do("extend", "POST", "/v1/jobs/wire-1/extend", map[string]any{"token": tokens["wire-1"]}, http.StatusOK)
	do("ack", "POST", "/v1/jobs/wire-1/ack", map[string]any{"token": tokens["wire-1"], "result_text": "done"}, http.StatusOK)
	do("nak", "POST", "/v1/jobs/wire-2/nak", map[string]any{"token": tokens["wire-2"], "delay": "1h", "error": "boom"}, http.StatusOK)
	do("get_succeeded", "GET", "/v1/jobs/wire-1", nil, http.StatusOK)
	do("get_retrying", "GET", "/v1/jobs/wire-2?consistency=local", nil, http.StatusOK)
	do("cancel", "POST", "/v1/jobs/wire-3/cancel", map[string]any{"reason": "not needed"}, http.StatusOK)
	do("retry", "POST", "/v1/jobs/wire-3/retry", nil, http.StatusOK)
	do("pause", "POST", "/v1/queues/wire/pause", nil, http.StatusOK)
	do("resume", "POST", "/v1/queues/wire/resume", nil, http.StatusOK)
	do("stats", "GET", "/v1/stats", nil, http.StatusOK)
	do("error", "GET", "/v1/jobs/wire-9", nil, http.StatusNotFound)
	// The cluster's views are recorded once every member has caught up
	// with the writes above (polled: a reply taken mid-catch-up has other
	// keys, e.g. a member's round).
	settled := func(name, path string) {
		t.Helper()
		var r reply
		waitUntil(t, 30*time.Second, name+": every member caught up and ready", func() bool {
			r = jsonCall(t, c, d, "GET", path, nil)
			return r.code == http.StatusOK && caughtUp(r.raw)
		})
		g.check(name, []byte(r.raw))
	}
	settled("status", "/v1/cluster/status")
	settled("status_self", "/v1/cluster/status?members=0")
	settled("members", "/v1/cluster/members")
	do("member_add_voter", "POST", "/v1/cluster/members", map[string]any{"id": "t3", "address": d3.ctl.Node().Addr()}, http.StatusOK)
	do("member_remove", "DELETE", "/v1/cluster/members/t3", nil, http.StatusOK)
	g.check("watch", watchFrames(t, d, c, "resumed"))
	g.done()
	if r := jsonCall(t, c, d, "GET", "/v1/cluster/status?members=0", nil); !strings.Contains(r.raw, `"role":"Leader"`) {
		t.Fatalf("t1 no longer leads (a leader change during the scenario changes the replies): %s", r.raw)
	}
}

// caughtUp reports whether a status or members reply shows every member
// ready (status) and a caught-up voter (members; the leader's progress in a
// status).
func caughtUp(raw string) bool {
	type progress struct{ Suffrage, State string }
	type status struct {
		Ready    bool
		Progress []progress
	}
	var v struct {
		Self    *status
		Members []struct {
			progress
			Status *status
		}
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return false
	}
	current := func(p progress) bool { return p.State == "leader" || p.State == "caught_up" }
	ready := func(st *status) bool {
		return st != nil && st.Ready && !slices.ContainsFunc(st.Progress, func(p progress) bool { return !current(p) })
	}
	if v.Self != nil && !ready(v.Self) {
		return false
	}
	for _, m := range v.Members {
		switch {
		case v.Self != nil && !ready(m.Status):
			return false
		case v.Self == nil && (m.Suffrage != "voter" || !current(m.progress)):
			return false
		}
	}
	return true
}

// wireCluster starts t1 (bootstrapped alone, so it leads), adds t2 and t3
// through the API and waits until both are caught-up voters and every
// member reports ready. It returns t1, t3 and an API client. Timeouts of 1 s keep t1 leading on a loaded
// machine; no member runs workers on queue "wire".
func wireCluster(t *testing.T) (leader, t3 *daemon, c *http.Client) {
	t.Helper()
	slow := func(o *options) {
		o.Workers, o.Heartbeat, o.Election, o.ClusterID = false, time.Second, time.Second, "wire"
	}
	d, c := startTest(t, slow)
	for _, id := range []string{"t2", "t3"} {
		j, err := startJoinerIn(t, id, "wire", t.TempDir(), slow)
		if err != nil {
			t.Fatal(err)
		}
		t3 = j
		if r := jsonCall(t, c, d, "POST", "/v1/cluster/members", map[string]any{"id": id, "address": j.ctl.Node().Addr()}); r.code != http.StatusAccepted {
			t.Fatalf("add %s: %d %s", id, r.code, r.raw)
		}
	}
	waitUntil(t, 60*time.Second, "t2 and t3 caught-up voters, every member ready, t1 leading", func() bool {
		_, ms := membersOf(t, c, d)
		for _, id := range []string{"t2", "t3"} {
			if m := ms[id]; m == nil || m["suffrage"] != "voter" || m["state"] != "caught_up" {
				return false
			}
		}
		var st struct {
			Self    struct{ Role string }
			Members []struct{ Status *struct{ Ready bool } }
		}
		r := jsonCall(t, c, d, "GET", "/v1/cluster/status", nil)
		if json.Unmarshal([]byte(r.raw), &st) != nil || st.Self.Role != "Leader" || len(st.Members) != 3 {
			return false
		}
		return !slices.ContainsFunc(st.Members, func(m struct{ Status *struct{ Ready bool } }) bool { return m.Status == nil || !m.Status.Ready })
	})
	return d, t3, c
}

// waitUntil polls cond until it holds or within passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		<-tick.C
	}
}

// watchFrames reads queue "wire"'s events from index 1 until one of
// kind last, checks each frame's id and event lines against its data, and
// returns the data objects as one JSON array.
func watchFrames(t *testing.T, d *daemon, c *http.Client, last string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", d.URL()+"/v1/watch?from=1&queue=wire", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Transport: c.Transport}).Do(req) // no timeout: ctx bounds the stream
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var datas [][]byte
	sc := bufio.NewScanner(resp.Body)
	var id, event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			var ev struct {
				Index uint64
				Kind  string
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if id != strconv.FormatUint(ev.Index, 10) || event != ev.Kind {
				t.Fatalf("frame id %q event %q, data index %d kind %q", id, event, ev.Index, ev.Kind)
			}
			datas = append(datas, data)
			if ev.Kind == last {
				return append(append([]byte("["), bytes.Join(datas, []byte(","))...), ']')
			}
			id, event = "", ""
		}
	}
	t.Fatalf("watch ended before a %s event (%d events): %v", last, len(datas), sc.Err())
	return nil
}

// goldens checks (or, with -update, writes) the goldens of one run.
type goldens struct {
	t    *testing.T
	seen []string
}

// check compares reply body raw (compact JSON, as jobd writes it) with
// golden name.
func (g *goldens) check(name string, raw []byte) {
	g.t.Helper()
	g.seen = append(g.seen, name+".json")
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil || !bytes.Equal(compact.Bytes(), raw) {
		g.t.Fatalf("%s: reply is not compact JSON (%v): %s", name, err, raw)
	}
	norm, err := normalise(raw)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	var got bytes.Buffer
	if err := json.Indent(&got, norm, "", "  "); err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	got.WriteByte('\n')
	path := filepath.Join(wireDir, name+".json")
	if *update {
		if err := os.MkdirAll(wireDir, 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%s: %v (run with -update to record it)", name, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		g.t.Errorf("%s: the reply differs from %s %s", name, path, firstDiff(want, got.Bytes()))
	}
}

// done fails on goldens no step produced (a step renamed or dropped).
func (g *goldens) done() {
	g.t.Helper()
	files, err := filepath.Glob(filepath.Join(wireDir, "*.json"))
	if err != nil {
		g.t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(g.seen, filepath.Base(f)) {
			g.t.Errorf("golden %s: no step produces it (remove it)", f)
		}
	}
}

// firstDiff names the first line where got differs from want.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("at line %d:\n  want %s\n  got  %s", i+1, wl, gl)
		}
	}
	return ""
}
