package transport

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestQuiesceRaftEndsInboundQuietly: QuiesceRaft, called while "raft"
// (the consumer here) still runs, lets a request in flight be answered,
// ends the idle inbound connections, and the raft transport then closes
// without hashicorp/raft's connection handlers logging an error (before,
// every graceful stop logged "failed to decode incoming command" with
// "use of closed network connection" or "transport shutdown").
func TestQuiesceRaftEndsInboundQuietly(t *testing.T) {
	srv, logs := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	snt, err := srv.RaftTransport(RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cnt, err := cli.RaftTransport(RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cnt.Close() })
	got, release, stopped := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	stop := make(chan struct{})
	go func() { // the member's raft: answers until stopped
		defer close(stopped)
		n := 0
		for {
			select {
			case rpc := <-snt.Consumer():
				if n++; n == 2 { // the second request waits for release
					got <- struct{}{}
					<-release
				}
				rpc.Respond(&raft.RequestVoteResponse{Term: 1, Granted: true}, nil)
			case <-stop:
				return
			}
		}
	}()
	addr := raft.ServerAddress(srv.Addr())
	vote := func() error {
		var resp raft.RequestVoteResponse
		return cnt.RequestVote("srv", addr, &raft.RequestVoteRequest{Term: 1}, &resp)
	}
	// A request answered, then one in flight on the same (pooled) connection.
	if err := vote(); err != nil {
		t.Fatal(err)
	}
	inflight := make(chan error, 1)
	go func() { inflight <- vote() }()
	<-got
	quiesced := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.QuiesceRaft(ctx)
		close(quiesced)
	}()
	close(release)
	if err := <-inflight; err != nil {
		t.Fatalf("the request in flight at QuiesceRaft was not answered: %v", err)
	}
	<-quiesced
	srv.mu.Lock()
	for c := range srv.conns {
		if c.raftInbound {
			t.Errorf("an inbound raft connection is still open after QuiesceRaft")
		}
	}
	srv.mu.Unlock()
	// New inbound raft connections are refused before raft sees them.
	if err := vote(); err == nil {
		t.Errorf("a raft request was answered after QuiesceRaft")
	}
	close(stop)
	<-stopped
	_ = snt.Close()
	_ = srv.Close()
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "[ERROR]") {
			t.Errorf("logged: %s", line)
		}
	}
}

// A connection still in its handshake when the mux closes is closed
// without a warning: the "error" is the mux's own Close (jobd's graceful
// stop under test-under-load logged "no channel header ... use of closed
// network connection").
func TestCloseDuringHandshakeLogsNoWarning(t *testing.T) {
	srv, logs := newTestMux(t, "srv", Config{HandshakeTimeout: time.Minute})
	raw, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	waitFor(t, 10*time.Second, "the mux to track the connection", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 1
	})
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the connection's handler.
	for _, bad := range []string{"[WARN]", "[ERROR]", "use of closed network connection"} {
		if logs.contains(bad) {
			t.Fatalf("the mux logged %q closing a connection in its handshake:\n%s", bad, logs.String())
		}
	}
	if !logs.contains("closing inbound connection at shutdown") {
		t.Fatalf("the handler did not end before Close returned:\n%s", logs.String())
	}
}
