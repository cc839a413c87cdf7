package seam_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/raft/seam"
)

// hbCapture is a raft transport that keeps the heartbeat handler raft
// registers, so a test can play the connection goroutine that calls it.
type hbCapture struct {
	*raft.InmemTransport
	cb func(raft.RPC)
}

func (h *hbCapture) SetHeartbeatHandler(cb func(raft.RPC)) { h.cb = cb }

// TestSeamRoutesHeartbeatsByFastPath: a heartbeat the member's FastPath
// hook refuses reaches raft through the consumer (its main loop), never the
// fast-path callback; one it allows goes to the callback, not the consumer.
func TestSeamRoutesHeartbeatsByFastPath(t *testing.T) {
	_, inner := raft.NewInmemTransport("a")
	cap := &hbCapture{InmemTransport: inner}
	allow := map[uint64]bool{5: true}
	s := seam.Wrap(cap, seam.Hooks{FastPath: func(hb *raft.AppendEntriesRequest) bool { return allow[hb.Term] }})
	defer s.(raft.WithClose).Close()
	fast := make(chan raft.RPC, 1)
	s.SetHeartbeatHandler(func(rpc raft.RPC) { fast <- rpc })
	for _, term := range []uint64{5, 6} {
		rpc := raft.RPC{Command: &raft.AppendEntriesRequest{Term: term}, RespChan: make(chan raft.RPCResponse, 1)}
		go cap.cb(rpc)
		select {
		case got := <-fast:
			if !allow[term] {
				t.Fatalf("term %d heartbeat took the fast path", got.Command.(*raft.AppendEntriesRequest).Term)
			}
		case got := <-s.Consumer():
			if allow[term] {
				t.Fatalf("term %d heartbeat went through the consumer", got.Command.(*raft.AppendEntriesRequest).Term)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("term %d heartbeat delivered nowhere", term)
		}
	}
}

// TestSeamInterceptAnswersInsteadOfRaft: an RPC the Intercept hook handles
// never reaches the consumer; the others do, in order, clamped.
func TestSeamInterceptAnswersInsteadOfRaft(t *testing.T) {
	_, ta := raft.NewInmemTransport("a")
	b, tb := raft.NewInmemTransport("b")
	ta.Connect(b, tb)
	s := seam.Wrap(tb, seam.Hooks{Intercept: func(rpc raft.RPC) bool {
		if _, ok := rpc.Command.(*raft.TimeoutNowRequest); ok {
			rpc.Respond(&raft.TimeoutNowResponse{}, nil)
			return true
		}
		return false
	}})
	defer s.(raft.WithClose).Close()
	if err := ta.TimeoutNow("b", b, &raft.TimeoutNowRequest{}, &raft.TimeoutNowResponse{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- ta.AppendEntries("b", b, &raft.AppendEntriesRequest{Term: 1, PrevLogEntry: 3, LeaderCommitIndex: 9}, &raft.AppendEntriesResponse{})
	}()
	select {
	case rpc := <-s.Consumer():
		ae, ok := rpc.Command.(*raft.AppendEntriesRequest)
		if !ok {
			t.Fatalf("consumer got %T, want the append (the TimeoutNow was intercepted)", rpc.Command)
		}
		if ae.LeaderCommitIndex != 3 {
			t.Fatalf("leader commit %d reached raft, want it clamped to 3", ae.LeaderCommitIndex)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("append never reached the consumer")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSeamAnsweredSeesRaftsAnswerBeforeTheSender: the Answered hook is
// called with raft's answer to an RPC of the consumer path, before the
// sender receives it; an intercepted RPC is not reported.
func TestSeamAnsweredSeesRaftsAnswerBeforeTheSender(t *testing.T) {
	_, ta := raft.NewInmemTransport("a")
	b, tb := raft.NewInmemTransport("b")
	ta.Connect(b, tb)
	var seen []uint64
	sent := make(chan struct{})
	s := seam.Wrap(tb, seam.Hooks{
		Intercept: func(rpc raft.RPC) bool {
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && req.Term == 7 {
				rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
				return true
			}
			return false
		},
		Answered: func(rpc raft.RPC, resp raft.RPCResponse) {
			select {
			case <-sent:
				t.Error("the sender had its answer before Answered ran")
			default:
			}
			seen = append(seen, rpc.Command.(*raft.AppendEntriesRequest).Term, resp.Response.(*raft.AppendEntriesResponse).Term)
		},
	})
	defer s.(raft.WithClose).Close()
	if err := ta.AppendEntries("b", b, &raft.AppendEntriesRequest{Term: 7}, &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := ta.AppendEntries("b", b, &raft.AppendEntriesRequest{Term: 8}, &raft.AppendEntriesResponse{})
		close(sent)
		done <- err
	}()
	select {
	case rpc := <-s.Consumer():
		rpc.Respond(&raft.AppendEntriesResponse{Term: 9}, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("append never reached the consumer")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != 8 || seen[1] != 9 {
		t.Fatalf("Answered saw %v, want only the append of term 8 with raft's answer of term 9", seen)
	}
}

// TestSeamKeepsPreVoteAndClampsEveryPath checks the wrapper itself: raft
// enables pre-vote only on a transport implementing raft.WithPreVote, so
// the seam must keep it; and ClampCommit lowers exactly what passes the
// verified range.
func TestSeamKeepsPreVoteAndClampsEveryPath(t *testing.T) {
	_, inner := raft.NewInmemTransport("a")
	s := seam.Wrap(inner, seam.Hooks{})
	if _, ok := s.(raft.WithPreVote); !ok {
		t.Fatal("the seam over a pre-vote transport lost raft.WithPreVote")
	}
	if _, ok := s.(raft.WithClose); !ok {
		t.Fatal("the seam lost raft.WithClose")
	}
	for _, tc := range []struct {
		prev, entries, commit, want uint64
		clamped                     bool
	}{
		{prev: 4, entries: 0, commit: 5, want: 4, clamped: true},
		{prev: 4, entries: 2, commit: 9, want: 6, clamped: true},
		{prev: 4, entries: 2, commit: 6, want: 6},
		{prev: 4, entries: 2, commit: 3, want: 3},
		{prev: 0, entries: 0, commit: 0, want: 0},
	} {
		a := &raft.AppendEntriesRequest{PrevLogEntry: tc.prev, LeaderCommitIndex: tc.commit}
		for i := uint64(0); i < tc.entries; i++ {
			a.Entries = append(a.Entries, &raft.Log{Index: tc.prev + 1 + i, Term: 1})
		}
		lc, clamped := seam.ClampCommit(a)
		if lc != tc.commit || clamped != tc.clamped || a.LeaderCommitIndex != tc.want {
			t.Errorf("%+v: got leaderCommit %d clamped %v commit %d", tc, lc, clamped, a.LeaderCommitIndex)
		}
	}
	if err := s.(raft.WithClose).Close(); err != nil && !errors.Is(err, raft.ErrTransportShutdown) {
		t.Fatal(err)
	}
}
