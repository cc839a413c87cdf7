package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
)

// holdAppends is a member's raft transport whose appends carrying entries
// are held until release is closed; heartbeats, votes and the rest pass.
type holdAppends struct {
	hraft.Transport
	out     chan hraft.RPC
	release chan struct{}
	done    chan struct{}
}

func (h *holdAppends) Consumer() <-chan hraft.RPC { return h.out }

func (h *holdAppends) run() {
	for {
		var rpc hraft.RPC
		select {
		case rpc = <-h.Transport.Consumer():
		case <-h.done:
			return
		}
		if a, ok := rpc.Command.(*hraft.AppendEntriesRequest); ok && len(a.Entries) > 0 {
			select {
			case <-h.release:
			case <-h.done:
				return
			}
		}
		select {
		case h.out <- rpc:
		case <-h.done:
			return
		}
	}
}

// TestNotReadyWhileCatchingUp: a member added to a cluster that committed
// entries, knowing the leader from its heartbeats but not yet holding the
// entries (its appends held), is not ready: its own /readyz answers 503
// "catching up" with the leader's commit index, its status says ready
// false, and the leader's cluster status names it not ready. Before, it
// answered ready at commit 0, applied 0 (its own commit index, clamped to
// what it holds, was the measure). Once the entries flow it is ready.
func TestNotReadyWhileCatchingUp(t *testing.T) {
	d1, c := startTest(t, func(o *options) { o.Workers = false })
	for i := range 20 {
		if r := jsonCall(t, c, d1, "POST", "/v1/jobs", map[string]any{"id": fmt.Sprintf("j%d", i), "queue": "q", "kind": "echo"}); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
	}
	cid, _ := membersOf(t, c, d1)
	hold := &holdAppends{out: make(chan hraft.RPC), release: make(chan struct{}), done: make(chan struct{})}
	var once sync.Once
	releaseAppends := func() { once.Do(func() { close(hold.release) }) }
	t.Cleanup(func() { releaseAppends(); close(hold.done) })
	d2, err := startJoinerIn(t, "t2", cid, t.TempDir(), func(o *options) {
		o.Workers = false
		o.nodeOpts = append(o.nodeOpts, nodeopt.WrapTransport(func(_ string, inner hraft.Transport) hraft.Transport {
			hold.Transport = inner
			go hold.run()
			return hold
		}))
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := jsonCall(t, c, d1, "POST", "/v1/cluster/members", map[string]any{"id": "t2", "address": d2.ctl.Node().Addr()}); r.code != http.StatusAccepted {
		t.Fatalf("add: %d %s", r.code, r.raw)
	}
	deadline := time.Now().Add(20 * time.Second)
	for d2.ctl.Node().Status().LeaderID == "" {
		if time.Now().After(deadline) {
			t.Fatal("t2 never learnt the leader from its heartbeats")
		}
		time.Sleep(20 * time.Millisecond) // polling the member's status
	}
	st := d2.ctl.Node().Status()
	t.Logf("t2 while its appends are held: commit %d, applied %d, last %d; the leader's commit %d",
		st.CommitIndex, st.AppliedIndex, st.LastIndex, d1.ctl.Node().Status().CommitIndex)
	r := call(t, c, "GET", d2.URL()+"/readyz", "", "", nil)
	if r.code != http.StatusServiceUnavailable || !strings.Contains(r.raw, "catching up") {
		t.Errorf("/readyz of a member catching up: %d %s, want 503 catching up", r.code, r.raw)
	}
	self := jsonCall(t, c, d2, "GET", "/v1/cluster/status?members=0", nil).body["self"].(map[string]any)
	if self["ready"] != false || self["leader_commit_index"] == nil || self["leader_commit_index"].(float64) < 20 {
		t.Errorf("status of a member catching up: ready %v, leader commit %v", self["ready"], self["leader_commit_index"])
	}
	members, _ := jsonCall(t, c, d1, "GET", "/v1/cluster/status", nil).body["members"].([]any)
	for _, m := range members {
		mm := m.(map[string]any)
		if mm["id"] == "t2" {
			if s, _ := mm["status"].(map[string]any); s == nil || s["ready"] != false {
				t.Errorf("the leader's view of t2 catching up: %v", mm)
			}
		}
	}

	releaseAppends()
	waitReady(t, d2, c)
}
