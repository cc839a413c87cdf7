package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestShutdownLogFilter: the transport's closed-connection errors are
// dropped once shutdown has begun, and only those.
func TestShutdownLogFilter(t *testing.T) {
	var out bytes.Buffer
	log, filter := newLogger("info", &out)
	raftNet := log.Named("raft").Named("transport").Named("raft-net")
	closed := &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("use of closed network connection: %w", net.ErrClosed)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}

	raftNet.Error("failed to decode incoming command", "error", closed)
	if !strings.Contains(out.String(), "failed to decode incoming command") {
		t.Fatalf("dropped before shutdown: %q", out.String())
	}
	out.Reset()
	filter.shuttingDown()
	raftNet.Error("failed to decode incoming command", "error", closed)
	raftNet.Error("failed to flush response", "error", errors.New("write tcp: use of closed network connection"))
	if out.Len() != 0 {
		t.Fatalf("logged during shutdown: %q", out.String())
	}
	raftNet.Error("failed to decode incoming command", "error", reset)
	log.Error("shutdown", "error", closed)
	for _, want := range []string{"connection reset by peer", "[ERROR] jobd: shutdown"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q dropped: %q", want, out.String())
		}
	}
}
