package seam_test

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
	"github.com/jobraft/jobraft/transport"
)

// The seam's two rules on an append's commit index (docs/upstream.md U1,
// U11), checked at the transport: the commit clamp on every incoming
// append, entries or not, and the commit bound on every outgoing one,
// pipelined or not.

// raftNet is a raft transport over a real loopback Mux, closed at cleanup.
func raftNet(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	mux, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mux.Close() })
	nt, err := mux.RaftTransport(transport.RaftOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	return nt
}

// entries returns command entries from..to.
func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte("x")})
	}
	return out
}

// received waits for the next append on consumer, answers it Success and
// returns its commit index as raft would see it.
func received(t *testing.T, consumer <-chan raft.RPC) uint64 {
	t.Helper()
	select {
	case rpc := <-consumer:
		a, ok := rpc.Command.(*raft.AppendEntriesRequest)
		if !ok {
			t.Fatalf("received %T, want an append", rpc.Command)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: a.Term, Success: true}, nil)
		return a.LeaderCommitIndex
	case <-time.After(10 * time.Second):
		t.Fatal("no append received")
	}
	return 0
}

// ClampCommit lowers the commit index to the last entry the append
// verifies (PrevLogEntry + len(Entries)), with entries as without.
func TestClampCommit(t *testing.T) {
	for _, c := range []struct {
		name            string
		prev, n, commit uint64
		want            uint64
		clamped         bool
	}{
		{"heartbeat past its prev", 3, 0, 9, 3, true},
		{"entries, commit past the last", 3, 2, 9, 5, true},
		{"entries from an empty log, commit past the last", 0, 3, 7, 3, true},
		{"entries, commit at the last", 3, 2, 5, 5, false},
		{"entries, commit within them", 3, 2, 4, 4, false},
		{"heartbeat at its prev", 3, 0, 3, 3, false},
	} {
		a := &raft.AppendEntriesRequest{PrevLogEntry: c.prev, LeaderCommitIndex: c.commit}
		if c.n > 0 {
			a.Entries = entries(c.prev+1, c.prev+c.n)
		}
		lc, clamped := seam.ClampCommit(a)
		if a.LeaderCommitIndex != c.want || clamped != c.clamped || lc != c.commit {
			t.Errorf("%s: commit %d clamped %v (reported leader commit %d), want %d %v (%d)",
				c.name, a.LeaderCommitIndex, clamped, lc, c.want, c.clamped, c.commit)
		}
	}
}

// An append carrying entries, sent over TCP to a member behind the seam,
// reaches raft with its commit index clamped to its last entry, and the
// member's OnClamp hook is told: sent synchronously and pipelined alike.
func TestSeamClampsAppendsCarryingEntries(t *testing.T) {
	sender, receiver := raftNet(t), raftNet(t)
	type clamp struct{ leader, to uint64 }
	clamps := make(chan clamp, 4)
	s := seam.Wrap(receiver, seam.Hooks{OnClamp: func(lc, to uint64) { clamps <- clamp{lc, to} }})
	defer s.(raft.WithClose).Close()
	target := receiver.LocalAddr()
	req := func() *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 3, PrevLogTerm: 2, Entries: entries(4, 5), LeaderCommitIndex: 9}
	}

	done := make(chan error, 1)
	go func() { done <- sender.AppendEntries("r", target, req(), &raft.AppendEntriesResponse{}) }()
	if got := received(t, s.Consumer()); got != 5 {
		t.Fatalf("append of entries 4..5 with leader commit 9 reached raft with commit %d, want 5", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := <-clamps; c != (clamp{9, 5}) {
		t.Fatalf("OnClamp told %+v, want leader commit 9 clamped to 5", c)
	}

	p, err := sender.AppendEntriesPipeline("r", target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.AppendEntries(req(), &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	if got := received(t, s.Consumer()); got != 5 {
		t.Fatalf("pipelined append of entries 4..5 with leader commit 9 reached raft with commit %d, want 5", got)
	}
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipelined append was never answered")
	}
	if c := <-clamps; c != (clamp{9, 5}) {
		t.Fatalf("OnClamp told %+v for the pipelined append, want leader commit 9 clamped to 5", c)
	}
}

// A member's own appends carry a commit index within its CommitBound on
// every path: a synchronous append and a pipelined one (what raft uses once
// a follower is caught up) alike. A commit index below the bound is sent
// as it is.
func TestSeamBoundsTheCommitOfPipelinedAppends(t *testing.T) {
	sender, receiver := raftNet(t), raftNet(t)
	const bound = 5
	s := seam.Wrap(sender, seam.Hooks{CommitBound: func() uint64 { return bound }})
	defer s.(raft.WithClose).Close()
	target := receiver.LocalAddr()
	// prev 10 and two entries: the receiver's clamp (12) is not what lowers it.
	req := func(commit uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 10, PrevLogTerm: 2, Entries: entries(11, 12), LeaderCommitIndex: commit}
	}

	done := make(chan error, 1)
	go func() { done <- s.AppendEntries("r", target, req(11), &raft.AppendEntriesResponse{}) }()
	if got := received(t, receiver.Consumer()); got != bound {
		t.Fatalf("append with leader commit 11 arrived with commit %d, want the bound %d", got, bound)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	p, err := s.AppendEntriesPipeline("r", target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct{ commit, want uint64 }{{11, bound}, {4, 4}} {
		if _, err := p.AppendEntries(req(c.commit), &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
		if got := received(t, receiver.Consumer()); got != c.want {
			t.Fatalf("pipelined append with leader commit %d arrived with commit %d, want %d (bound %d)", c.commit, got, c.want, bound)
		}
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the pipelined append was never answered")
		}
	}
}
