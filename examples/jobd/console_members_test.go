package main

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/raft"
)

// The cluster page adds and removes members with the API's checks: a bad
// address or an ID taken at another address is refused and changes
// nothing, and so is a member that does not answer (503: its cluster ID
// cannot be checked); an add of a member started with -join puts it in
// the configuration; a remove takes it out.
func TestConsoleAddsAndRemovesMembers(t *testing.T) {
	d, api := startTest(t, nil)
	c := consoleClient(t, d)
	code, body, _ := getPage(t, c, d.URL()+"/console/cluster")
	if code != 200 || !strings.Contains(body, `id="add-member"`) || !strings.Contains(body, `id="remove-t1"`) {
		t.Fatalf("cluster page: %d, add form or remove button missing", code)
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field on the cluster page")
	}
	post := func(path string, form url.Values) int {
		t.Helper()
		form.Set("csrf", m[1])
		resp, err := c.PostForm(d.URL()+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	members := func() []raft.Member { return d.ctl.Node().Status().Members }
	has := func(id string) (raft.Member, bool) {
		i := slices.IndexFunc(members(), func(m raft.Member) bool { return m.ID == id })
		if i < 0 {
			return raft.Member{}, false
		}
		return members()[i], true
	}
	self := members()[0]

	for _, bad := range []url.Values{
		{"id": {"n9"}, "address": {"nowhere"}},
		{"id": {"n9/x"}, "address": {"127.0.0.1:1"}},
		{"id": {"n9"}, "address": {self.Address}},     // taken by t1
		{"id": {self.ID}, "address": {"127.0.0.1:1"}}, // t1 is elsewhere
	} {
		if code := post("/console/cluster/add", bad); code < 400 || code >= 500 {
			t.Errorf("add %v: %d, want 4xx", bad, code)
		}
	}
	if n := len(members()); n != 1 {
		t.Fatalf("a refused add changed the configuration: %d members", n)
	}

	if code := post("/console/cluster/add", url.Values{"id": {"n9"}, "address": {"127.0.0.1:1"}}); code != http.StatusServiceUnavailable {
		t.Errorf("add of a member that does not answer: %d, want 503", code)
	}
	if n := len(members()); n != 1 {
		t.Fatalf("a refused add changed the configuration: %d members", n)
	}

	cid, _ := membersOf(t, api, d)
	j, _ := startJoiner(t, "n9", cid)
	if code := post("/console/cluster/add", url.Values{"id": {"n9"}, "address": {j.ctl.Node().Addr()}}); code != http.StatusSeeOther {
		t.Fatalf("add: %d, want 303", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := has("n9"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n9 not in the configuration 10 s after the add")
		}
		time.Sleep(20 * time.Millisecond) // polling the configuration, not waiting for it
	}

	if code := post("/console/cluster/remove", url.Values{"id": {"n8"}}); code != http.StatusNotFound {
		t.Errorf("remove of no member: %d, want 404", code)
	}
	if code := post("/console/cluster/remove", url.Values{"id": {"n9"}}); code != http.StatusSeeOther {
		t.Fatalf("remove: %d, want 303", code)
	}
	if _, ok := has("n9"); ok {
		t.Fatal("n9 still in the configuration after its remove answered")
	}
}
