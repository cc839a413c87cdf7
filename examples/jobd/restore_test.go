package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestRestoreCommand: jobd restore refuses a missing flag (usage), a data
// dir that is not empty and the backup's own cluster ID, each writing
// nothing; a good restore writes the identity of the new cluster, and jobd
// started on the restored dir with that -cluster-id serves every job.
func TestRestoreCommand(t *testing.T) {
	d, c := startTest(t, func(o *options) { o.Workers = false; o.ClusterID = "old" })
	for i := 0; i < 3; i++ {
		if r := jsonCall(t, c, d, "POST", "/v1/jobs", map[string]any{"id": fmt.Sprintf("r%d", i), "queue": "work", "kind": "echo"}); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
	}
	r := call(t, c, "GET", d.URL()+"/v1/cluster/backup", testToken, "", nil)
	if r.code != http.StatusOK {
		t.Fatalf("backup: %d", r.code)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "b.jrb")
	if err := os.WriteFile(file, []byte(r.raw), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := l.Addr().String() // free right now, for the restored member
	l.Close()
	peers := "n1=" + raftAddr
	args := func(data, cluster string) []string {
		return []string{"-from", file, "-data", data, "-id", "n1", "-peers", peers, "-cluster-id", cluster}
	}
	if err := restoreCmd([]string{"-from", file, "-data", filepath.Join(dir, "x"), "-id", "n1", "-peers", peers}, io.Discard); !errors.Is(err, errRestoreUsage) {
		t.Fatalf("without -cluster-id: %v, want a usage error", err)
	}
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := restoreCmd(args(full, "new"), io.Discard); !errors.Is(err, errRestore) || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("into a non-empty dir: %v", err)
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Fatalf("refused restore changed the dir: %d entries", len(ents))
	}
	if err := restoreCmd(args(filepath.Join(dir, "same"), "old"), io.Discard); !errors.Is(err, errRestore) {
		t.Fatalf("under the backup's cluster ID: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "same")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused restore created the data dir: %v", err)
	}

	data := filepath.Join(dir, "n1")
	var out strings.Builder
	if err := restoreCmd(args(data, "new"), &out); err != nil {
		t.Fatal(err)
	}
	id, err := readIdentity(data)
	if err != nil || id.Cluster != "new" || id.Member != "n1" {
		t.Fatalf("identity %+v %v", id, err)
	}
	t.Log(strings.TrimSpace(out.String()))

	o := defaults()
	o.ID, o.DataDir, o.Token, o.ClusterID, o.Peers = "n1", data, testToken, "new", peers
	o.RaftAddr, o.HTTPAddr = raftAddr, "127.0.0.1:0"
	o.Heartbeat, o.Election, o.Workers, o.ShutdownGrace = 200*time.Millisecond, 200*time.Millisecond, false, 5*time.Second
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	d2, err := start(context.Background(), o, newMetrics(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.shutdown(o.ShutdownGrace) })
	waitReady(t, d2, c)
	for i := 0; i < 3; i++ {
		if r := jsonCall(t, c, d2, "GET", fmt.Sprintf("/v1/jobs/r%d", i), nil); r.code != http.StatusOK || r.body["state"] != "pending" {
			t.Fatalf("restored job r%d: %d %s", i, r.code, r.raw)
		}
	}
}
