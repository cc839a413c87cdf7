package transport

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestRaftDialErrorNamesAddressOnce: a refused raft dial reads "dial tcp A:
// connect: connection refused", not "dial tcp A: dial tcp A: ..." (the
// text hashicorp/raft logs for every failed heartbeat and append).
func TestRaftDialErrorNamesAddressOnce(t *testing.T) {
	m, _ := newTestMux(t, "a", Config{})
	nt, err := m.RaftTransport(RaftOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	// A port that was free a moment ago: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sl := m.raft
	_, err = sl.Dial(raft.ServerAddress(addr), time.Second)
	if err == nil {
		t.Fatalf("dial %s succeeded", addr)
	}
	if n := strings.Count(err.Error(), addr); n != 1 {
		t.Fatalf("dial error names %s %d times: %v", addr, n, err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("dial error %v (%T) is not a *net.OpError of op dial", err, err)
	}
}

// TestCallDialErrorNamesAddressOnce: a refused RPC dial names the address
// once ("transport: call M to A: dial: connect: connection refused"), not
// once per layer ("... to A: dial: dial tcp A: connect: ..."), and still
// matches its class and the net error.
func TestCallDialErrorNamesAddressOnce(t *testing.T) {
	m, _ := newTestMux(t, "a", Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = m.Call(context.Background(), addr, "jr.status", nil)
	if err == nil {
		t.Fatalf("call to %s succeeded", addr)
	}
	if n := strings.Count(err.Error(), addr); n != 1 {
		t.Fatalf("call error names %s %d times: %v", addr, n, err)
	}
	for _, want := range []string{"jr.status", "dial", "connection refused", "not delivered"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("call error %q lacks %q", err, want)
		}
	}
	var oe *net.OpError
	if !errors.Is(err, ErrNotDelivered) || !errors.As(err, &oe) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("call error %v does not match ErrNotDelivered, *net.OpError and ECONNREFUSED", err)
	}
}
