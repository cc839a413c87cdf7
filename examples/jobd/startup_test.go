package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// freeAddr is a loopback address whose port is free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// baseOptions are startTest's options, not started.
func baseOptions(id, dir string) options {
	o := defaults()
	o.ID, o.DataDir, o.Token = id, dir, testToken
	o.RaftAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Heartbeat, o.Election = 200*time.Millisecond, 200*time.Millisecond
	o.Queues, o.Workers = "work=1", false
	o.ShutdownGrace = 5 * time.Second
	return o
}

// tryStart starts o; a daemon that did start is shut down at cleanup.
func tryStart(t *testing.T, o options) (*daemon, error) {
	t.Helper()
	if err := o.validate(); err != nil {
		return nil, err
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard})
	d, err := start(context.Background(), o, newMetrics(), log)
	if err == nil {
		t.Cleanup(func() { _ = d.shutdown(o.ShutdownGrace) })
	}
	return d, err
}

func TestClusterCertFromAnotherCARefused(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := gencerts([]string{"-dir", dir, "-names", "t1"}); err != nil {
			t.Fatal(err)
		}
	}
	o := baseOptions("t1", t.TempDir())
	o.ClusterCA = filepath.Join(a, "ca.pem")
	o.ClusterCert, o.ClusterKey = filepath.Join(b, "t1.pem"), filepath.Join(b, "t1-key.pem")
	_, err := tryStart(t, o)
	if !errors.Is(err, errClusterCert) || !strings.Contains(err.Error(), o.ClusterCert) {
		t.Fatalf("a member certificate from another CA: %v, want errClusterCert naming %s", err, o.ClusterCert)
	}
	o.ClusterCert, o.ClusterKey = filepath.Join(a, "t1.pem"), filepath.Join(a, "t1-key.pem")
	if _, err := tryStart(t, o); err != nil {
		t.Fatalf("a certificate of the cluster CA: %v", err)
	}
}

// TestDataDirIdentity: a data dir remembers its cluster and member; a start
// with another cluster's peers or another member ID is refused, a start
// with the same flags (or the stored -cluster-id) goes ahead.
func TestDataDirIdentity(t *testing.T) {
	dir := t.TempDir()
	a1, a2 := freeAddr(t), freeAddr(t)
	o := baseOptions("t1", dir)
	o.RaftAddr, o.Peers, o.Bootstrap = a1, "t1="+a1+",t2="+a2, true
	d, err := tryStart(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.shutdown(o.ShutdownGrace); err != nil {
		t.Fatal(err)
	}
	id, err := readIdentity(dir)
	if err != nil || id.Member != "t1" || id.Cluster == "" {
		t.Fatalf("identity %+v %v", id, err)
	}

	// The data dir given to a member of another cluster (same member ID).
	b1, b2 := freeAddr(t), freeAddr(t)
	other := o
	other.RaftAddr, other.Peers = b1, "t1="+b1+",t2="+b2
	if _, err := tryStart(t, other); !errors.Is(err, errOtherCluster) || !strings.Contains(err.Error(), id.Cluster) {
		t.Fatalf("another cluster's peers: %v, want errOtherCluster naming %s", err, id.Cluster)
	}
	// The data dir of t1 given to t2.
	swapped := o
	swapped.ID, swapped.RaftAddr = "t2", a2
	if _, err := tryStart(t, swapped); !errors.Is(err, errOtherMember) || !strings.Contains(err.Error(), `"t1"`) {
		t.Fatalf("another member's data dir: %v, want errOtherMember naming t1", err)
	}
	// A -cluster-id that is not the stored one.
	wrong := o
	wrong.ClusterID = "not-" + id.Cluster
	if _, err := tryStart(t, wrong); !errors.Is(err, errOtherCluster) {
		t.Fatalf("wrong -cluster-id: %v, want errOtherCluster", err)
	}
	// The same flags start.
	d, err = tryStart(t, o)
	if err != nil {
		t.Fatalf("same flags: %v", err)
	}
	if err := d.shutdown(o.ShutdownGrace); err != nil {
		t.Fatal(err)
	}
	// New peers with the stored -cluster-id (the operator vouches) start.
	other.ClusterID = id.Cluster
	if _, err := tryStart(t, other); err != nil {
		t.Fatalf("new peers with the stored -cluster-id: %v", err)
	}
}

// TestSameMemberIDTwice: a second member started with an ID -peers gives
// to another address is refused before it opens anything.
func TestSameMemberIDTwice(t *testing.T) {
	a1, a2 := freeAddr(t), freeAddr(t)
	o := baseOptions("t1", t.TempDir())
	o.RaftAddr, o.Peers, o.Bootstrap = a2, "t1="+a1+",t2="+a2, true // t2's address, t1's ID
	_, err := tryStart(t, o)
	if !errors.Is(err, errSelfAddress) || !strings.Contains(err.Error(), a1) {
		t.Fatalf("member t1 listening on t2's address: %v, want errSelfAddress naming %s", err, a1)
	}
	if entries, _ := os.ReadDir(o.DataDir); len(entries) != 0 {
		t.Fatalf("a refused start left %d entries in the data dir", len(entries))
	}
}

// TestDataDirInUse: a second daemon on a data dir in use is refused with the
// pid holding it, at once (not after the stable store's timeout).
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	if _, err := tryStart(t, baseOptions("t1", dir)); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err := tryStart(t, baseOptions("t1", dir))
	if !errors.Is(err, errDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second daemon on the data dir: %v, want errDataDirLocked naming pid %d", err, os.Getpid())
	}
	if el := time.Since(begin); el > 500*time.Millisecond {
		t.Fatalf("refused after %v", el)
	}
}
