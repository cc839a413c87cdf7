package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// A member whose log failed closed (fsync EIO on a real fault filesystem)
// answers /readyz 503 "log_failed" naming the class, reports log_failed in
// its status and exports jobd_raft_log_failed 1; restarted from the same
// data dir on a healthy disk it is ready again and the field is gone.
func TestReadyzNamesAFailedLog(t *testing.T) {
	ffs := faultfs.New(wal.OSFS{})
	o := defaults()
	o.ID, o.DataDir, o.Token = "t1", t.TempDir(), testToken
	o.RaftAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Heartbeat, o.Election = 200*time.Millisecond, 200*time.Millisecond
	o.Queues, o.MaxBody, o.ShutdownGrace = "work=2", 4096, 5*time.Second
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard})
	c := &http.Client{Timeout: 10 * time.Second}

	o.nodeOpts = []nodeopt.Option{nodeopt.WALOptions(wal.WithFS(ffs))}
	d, err := start(context.Background(), o, newMetrics(), log)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, d, c)
	if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": "before", "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
		t.Fatalf("submit before the fault: %d %s", r.code, r.raw)
	}

	ffs.FailSyncs(syscall.EIO)
	// The next write fails the log; the submit's own outcome is not the
	// point (it is refused or unknown).
	short := &http.Client{Timeout: time.Second}
	req, _ := http.NewRequest("POST", d.URL()+"/v1/jobs", strings.NewReader(`{"id":"during","queue":"work","kind":"echo"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := short.Do(req); err == nil {
		resp.Body.Close()
	}
	var ready reply
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ready = call(t, c, "GET", d.URL()+"/readyz", "", "", nil)
		if ready.code == http.StatusServiceUnavailable && strings.Contains(ready.raw, "log_failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never named the failed log: %d %s", ready.code, ready.raw)
		}
		<-tick.C
	}
	if !strings.Contains(ready.raw, wal.FailSync) {
		t.Fatalf("/readyz does not name the class %q: %s", wal.FailSync, ready.raw)
	}
	if st := d.ctl.Node().Status(); st.LogFailed != wal.FailSync {
		t.Fatalf("Status.LogFailed = %q, want %q", st.LogFailed, wal.FailSync)
	}
	st := jsonCall(t, c, d, "GET", "/v1/cluster/status?members=0", nil)
	self, _ := st.body["self"].(map[string]any)
	if self == nil || self["log_failed"] != wal.FailSync || self["ready"] != false {
		t.Fatalf("/v1/cluster/status of the failed member: %d %s", st.code, st.raw)
	}
	if r := call(t, c, "GET", d.URL()+"/metrics", testToken, "", nil); !strings.Contains(r.raw, "\njobd_raft_log_failed 1\n") {
		t.Fatalf("/metrics: jobd_raft_log_failed 1 missing")
	}
	_ = d.shutdown(o.ShutdownGrace) // closing a failed log may report it

	// The operator replaced the disk: the same data dir, a healthy FS.
	o.nodeOpts = nil
	d, err = start(context.Background(), o, newMetrics(), log)
	if err != nil {
		t.Fatalf("restart on a healthy disk: %v", err)
	}
	t.Cleanup(func() {
		if err := d.shutdown(o.ShutdownGrace); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	waitReady(t, d, c)
	if st := d.ctl.Node().Status(); st.LogFailed != "" {
		t.Fatalf("after the restart Status.LogFailed = %q", st.LogFailed)
	}
	if r := call(t, c, "GET", d.URL()+"/metrics", testToken, "", nil); !strings.Contains(r.raw, "\njobd_raft_log_failed 0\n") {
		t.Fatalf("/metrics after the restart: jobd_raft_log_failed 0 missing")
	}
	if r := jsonCall(t, c, d, "GET", "/v1/jobs/before", nil); r.code != http.StatusOK {
		t.Fatalf("the job acknowledged before the fault: %d %s", r.code, r.raw)
	}
}
