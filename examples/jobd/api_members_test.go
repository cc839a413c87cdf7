package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// startJoiner starts a member with -join (no bootstrap) and does not wait
// for it to be ready: it has no leader until it is added.
func startJoiner(t *testing.T, id, clusterID string) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	d, err := startJoinerIn(t, id, clusterID, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.ctl.Node().Status(); len(st.Members) != 0 || st.Role == "Leader" {
		t.Fatalf("a -join member bootstrapped: %+v", st.Members)
	}
	return d, dir
}

func startJoinerIn(t *testing.T, id, clusterID, dir string, tweaks ...func(*options)) (*daemon, error) {
	t.Helper()
	o := defaults()
	o.ID, o.DataDir, o.Token = id, dir, testToken
	o.RaftAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Heartbeat, o.Election = 200*time.Millisecond, 200*time.Millisecond
	o.Queues, o.Workers = "work=2", true
	o.ShutdownGrace = 5 * time.Second
	o.Join, o.ClusterID = true, clusterID
	for _, tweak := range tweaks {
		tweak(&o)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	d, err := start(context.Background(), o, newMetrics(), log)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { d.shutdown(o.ShutdownGrace) })
	return d, nil
}

func membersOf(t *testing.T, c *http.Client, d *daemon) (string, map[string]map[string]any) {
	t.Helper()
	r := jsonCall(t, c, d, "GET", "/v1/cluster/members", nil)
	if r.code != http.StatusOK {
		t.Fatalf("GET members: %d %s", r.code, r.raw)
	}
	out := map[string]map[string]any{}
	list, _ := r.body["members"].([]any)
	for _, m := range list {
		mm := m.(map[string]any)
		out[mm["id"].(string)] = mm
	}
	cid, _ := r.body["cluster_id"].(string)
	return cid, out
}

// A member started with -join (and the cluster's ID) is added through the
// API: it joins as a non-voter, the leader's policy promotes it, GET shows
// it a caught-up voter; bad requests are refused with a 4xx and change
// nothing; DELETE removes it.
func TestMembersAddAndRemoveThroughTheAPI(t *testing.T) {
	d1, c := startTest(t, nil)
	cid, ms := membersOf(t, c, d1)
	if cid == "" || len(ms) != 1 || ms["t1"]["suffrage"] != "voter" || ms["t1"]["state"] != "leader" {
		t.Fatalf("members of a one-member cluster: %s %v", cid, ms)
	}
	d2, dir2 := startJoiner(t, "t2", cid)
	if id, err := readIdentity(dir2); err != nil || id.Cluster != cid {
		t.Fatalf("joiner's identity: %+v, %v; want cluster %s", id, err, cid)
	}
	addr := d2.ctl.Node().Addr()

	for name, body := range map[string]map[string]any{
		"bad id":             {"id": "../x", "address": addr},
		"no address":         {"id": "t2"},
		"bad address":        {"id": "t2", "address": "nowhere"},
		"address of another": {"id": "t9", "address": d1.ctl.Node().Addr()},
	} {
		if r := jsonCall(t, c, d1, "POST", "/v1/cluster/members", body); r.code/100 != 4 {
			t.Fatalf("%s: %d %s, want a 4xx", name, r.code, r.raw)
		}
	}
	if r := call(t, c, "POST", d1.URL()+"/v1/cluster/members", "", "application/json", []byte(`{"id":"t2","address":"`+addr+`"}`)); r.code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", r.code)
	}
	if _, ms := membersOf(t, c, d1); len(ms) != 1 {
		t.Fatalf("refused requests changed the members: %v", ms)
	}

	if r := jsonCall(t, c, d1, "POST", "/v1/cluster/members", map[string]any{"id": "t2", "address": addr}); r.code != http.StatusAccepted {
		t.Fatalf("add: %d %s", r.code, r.raw)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, ms = membersOf(t, c, d1)
		if m := ms["t2"]; m != nil && m["suffrage"] == "voter" && m["state"] == "caught_up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("t2 not a caught-up voter: %v", ms["t2"])
		}
		<-time.After(20 * time.Millisecond) // poll interval
	}
	if add, _ := ms["t2"]["add"].(map[string]any); add == nil || add["state"] != "promoted" {
		t.Fatalf("t2's add: %v", ms["t2"]["add"])
	}
	waitReady(t, d2, c)
	if r := jsonCall(t, c, d2, "POST", "/v1/cluster/members", map[string]any{"id": "t2", "address": "127.0.0.1:1"}); r.code != http.StatusConflict {
		t.Fatalf("the ID at another address: %d %s, want 409", r.code, r.raw)
	}
	if r := jsonCall(t, c, d2, "DELETE", "/v1/cluster/members/nobody", nil); r.code != http.StatusNotFound {
		t.Fatalf("remove an unknown member: %d %s", r.code, r.raw)
	}
	// Removed through the member itself (forwarded to the leader).
	if r := jsonCall(t, c, d2, "DELETE", "/v1/cluster/members/t2", nil); r.code != http.StatusOK {
		t.Fatalf("remove: %d %s", r.code, r.raw)
	}
	if _, ms := membersOf(t, c, d1); len(ms) != 1 || ms["t2"] != nil {
		t.Fatalf("after the removal: %v", ms)
	}
}

// -join refuses to start without the cluster's ID, or with -peers or
// -bootstrap: a member meant to join must never bootstrap a cluster of its
// own.
func TestJoinFlagNeedsTheClusterID(t *testing.T) {
	for name, args := range map[string][]string{
		"no cluster id": {"-join"},
		"bootstrap":     {"-join", "-cluster-id", "c", "-bootstrap"},
		"peers":         {"-join", "-cluster-id", "c", "-peers", "n1=127.0.0.1:7400"},
	} {
		_, err := parseOptions(append([]string{"-id", "n1", "-data", t.TempDir()}, args...))
		if err == nil || !strings.Contains(err.Error(), "-join") {
			t.Fatalf("%s: %v, want a -join refusal", name, err)
		}
	}
	if _, err := parseOptions([]string{"-id", "n1", "-data", t.TempDir(), "-join", "-cluster-id", "c"}); err != nil {
		t.Fatal(err)
	}
}

// A -join member's data dir keeps the cluster ID it was started with: a
// later start for another cluster is refused (the identity check), the
// same cluster's start is not.
func TestJoinedDataDirKeepsItsClusterID(t *testing.T) {
	d, dir := startJoiner(t, "t2", "cluster-a")
	if err := d.shutdown(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := startJoinerIn(t, "t2", "cluster-b", dir); !errors.Is(err, errOtherCluster) {
		t.Fatalf("restart for another cluster: %v, want errOtherCluster", err)
	}
	d2, err := startJoinerIn(t, "t2", "cluster-a", dir)
	if err != nil {
		t.Fatalf("restart for its own cluster: %v", err)
	}
	if err := d2.shutdown(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}
