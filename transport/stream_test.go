package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The raft channel is refused until the member creates its raft transport and
// after that transport closes; the RPC channel keeps working throughout.
func TestRaftChannelLifecycle(t *testing.T) {
	srv, logs := newTestMux(t, "srv", Config{})
	srv.Handle("echo", echo)
	cli, _ := newTestMux(t, "cli", Config{})
	attempt := func() error {
		c, _ := newTestMux(t, "cli", Config{})
		nt, err := c.RaftTransport(RaftOptions{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer nt.Close()
		var resp raft.RequestVoteResponse
		return nt.RequestVote("srv", raft.ServerAddress(srv.Addr()), &raft.RequestVoteRequest{Term: 1}, &resp)
	}
	if err := attempt(); err == nil {
		t.Fatal("raft channel accepted before RaftTransport")
	}
	waitFor(t, 5*time.Second, "logged refusal", func() bool { return logs.contains("raft channel not open") })

	nt, err := srv.RaftTransport(RaftOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RaftTransport(RaftOptions{}); !errors.Is(err, ErrRaftTransportExists) {
		t.Fatalf("second RaftTransport: %v", err)
	}
	go func() {
		for rpc := range nt.Consumer() {
			rpc.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
		}
	}()
	if err := attempt(); err != nil {
		t.Fatalf("raft channel after RaftTransport: %v", err)
	}
	if got := nt.LocalAddr(); string(got) != srv.Addr() {
		t.Fatalf("LocalAddr %q, want advertised %q", got, srv.Addr())
	}
	_ = nt.Close()
	if err := attempt(); err == nil {
		t.Fatal("raft channel accepted after the raft transport closed")
	}
	if got, err := cli.Call(context.Background(), srv.Addr(), "echo", []byte("x")); err != nil || string(got) != "echo:x" {
		t.Fatalf("rpc after raft transport closed: %q %v", got, err)
	}
}
