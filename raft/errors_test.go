package raft

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/transport"
)

// TestForwardErrorNamesLeaderOnce: a proposal forwarded to a leader that
// refuses the connection names the leader's address once: the proposal's
// error names the leader, the call's error under it does not repeat it.
func TestForwardErrorNamesLeaderOnce(t *testing.T) {
	m, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, cause := m.Call(context.Background(), addr, methodPropose, nil)
	if cause == nil {
		t.Fatalf("call to %s succeeded", addr)
	}
	err = rejected(addr, cause)
	text := err.Error()
	if n := strings.Count(text, addr); n != 1 {
		t.Fatalf("forward error names %s %d times: %s", addr, n, text)
	}
	for _, want := range []string{`(leader "` + addr + `")`, methodPropose, "connection refused", "not delivered"} {
		if !strings.Contains(text, want) {
			t.Errorf("forward error %q lacks %q", text, want)
		}
	}
	if !errors.Is(err, ErrRejected) || !errors.Is(err, transport.ErrNotDelivered) {
		t.Errorf("forward error %v lost its classes", err)
	}
	// Another address in the cause (not the leader's) is kept.
	other := rejected("10.0.0.9:7000", cause).Error()
	if !strings.Contains(other, "to "+addr) {
		t.Errorf("a cause naming another address lost it: %s", other)
	}
}
