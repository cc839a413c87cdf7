package faultnet

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// wireRecorder is an inner transport that puts each request "on the wire"
// (JSON-encodes it, as a network transport would encode it) when it is
// delivered. A call whose response pointer is orig is the caller's own
// call, encoded at once; every other call is a duplicate delivery, encoded
// only after the test closed mutated, so the duplicate is read after the
// caller reused its request, as hashicorp/raft does. Without mutated, a
// duplicate is encoded as it arrives, concurrently with the caller's reuse:
// the race detector then sees any memory the two share.
type wireRecorder struct {
	raft.Transport // not called

	orig    any
	mutated chan struct{} // nil: duplicates are encoded as they arrive

	mu    sync.Mutex
	calls []string // encoded originals
	dups  []string // encoded duplicates
}

func (w *wireRecorder) deliver(t *testing.T, args, resp any) {
	if resp != w.orig && w.mutated != nil {
		<-w.mutated
	}
	b, err := json.Marshal(args)
	if err != nil {
		t.Error(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if resp == w.orig {
		w.calls = append(w.calls, string(b))
	} else {
		w.dups = append(w.dups, string(b))
	}
}

func (w *wireRecorder) encoded() (calls, dups []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...), append([]string(nil), w.dups...)
}

// recordingInner adapts a wireRecorder to raft.Transport and
// raft.WithPreVote for one test.
type recordingInner struct {
	*wireRecorder
	t *testing.T
}

func (r recordingInner) AppendEntries(_ raft.ServerID, _ raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	r.deliver(r.t, args, resp)
	return nil
}

func (r recordingInner) RequestVote(_ raft.ServerID, _ raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	r.deliver(r.t, args, resp)
	return nil
}

func (r recordingInner) RequestPreVote(_ raft.ServerID, _ raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	r.deliver(r.t, args, resp)
	return nil
}

func (r recordingInner) TimeoutNow(_ raft.ServerID, _ raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	r.deliver(r.t, args, resp)
	return nil
}

func (r recordingInner) InstallSnapshot(raft.ServerID, raft.ServerAddress, *raft.InstallSnapshotRequest, *raft.InstallSnapshotResponse, io.Reader) error {
	return nil
}

func (r recordingInner) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return &recordingPipeline{r: r, out: make(chan raft.AppendFuture, 16)}, nil
}

// recordingPipeline delivers each pipelined request at once and completes
// its future.
type recordingPipeline struct {
	r   recordingInner
	out chan raft.AppendFuture
}

func (p *recordingPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.r.deliver(p.r.t, args, resp)
	f := recordedFuture{req: args, resp: resp}
	p.out <- f
	return f, nil
}

func (p *recordingPipeline) Consumer() <-chan raft.AppendFuture { return p.out }
func (p *recordingPipeline) Close() error                       { return nil }

type recordedFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
}

func (f recordedFuture) Error() error                                          { return nil }
func (f recordedFuture) Start() time.Time                                      { return time.Time{} }
func (f recordedFuture) Request() *raft.AppendEntriesRequest                   { return f.req }
func (f recordedFuture) Response() *raft.AppendEntriesResponse                 { return f.resp }
func (recordingInner) Consumer() <-chan raft.RPC                               { return nil }
func (recordingInner) LocalAddr() raft.ServerAddress                           { return "a" }
func (recordingInner) SetHeartbeatHandler(func(rpc raft.RPC))                  {}
func (recordingInner) DecodePeer(b []byte) raft.ServerAddress                  { return raft.ServerAddress(b) }
func (recordingInner) EncodePeer(_ raft.ServerID, a raft.ServerAddress) []byte { return []byte(a) }

// batch returns an append-entries request of n entries from index first,
// with payloads and extensions, as replicateTo fills one.
func batch(term, first uint64, n int) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a:1")},
		Term:      term, PrevLogEntry: first - 1, PrevLogTerm: term, LeaderCommitIndex: first - 1,
	}
	//lint:ignore SA1019 raft v1.7.3 still fills the legacy field: a copy must hold it
	req.Leader = []byte("a:1")
	for i := 0; i < n; i++ {
		req.Entries = append(req.Entries, &raft.Log{
			Index: first + uint64(i), Term: term, Type: raft.LogCommand,
			Data: []byte{byte(first), byte(i), 1, 2, 3}, Extensions: []byte{9, 8, byte(i)},
		})
	}
	return req
}

// refill reuses req for the next batch the way hashicorp/raft's replicateTo
// does (the same request object, new entries), and also scribbles over the
// old entries' buffers in place, which a shallow copy would not survive.
func refill(req *raft.AppendEntriesRequest) {
	for _, e := range req.Entries {
		for i := range e.Data {
			e.Data[i] = 0xEE
		}
		e.Extensions[0] = 0xEE
		e.Term = 99
	}
	next := batch(req.Term, req.PrevLogEntry+uint64(len(req.Entries))+1, 3)
	req.PrevLogEntry, req.PrevLogTerm = next.PrevLogEntry, next.PrevLogTerm
	req.LeaderCommitIndex = next.LeaderCommitIndex
	req.Entries = next.Entries
	req.RPCHeader.ID[0] = 'z'
}

// TestFaultDuplicateIsCopiedAtSend: a duplicated request is the request as
// it was sent, even when the caller reuses the request object after its call
// returned (hashicorp/raft does, for every batch and heartbeat). Before the
// fix the duplicate was encoded from the caller's pointer, so it carried the
// next batch's entries (or scribbled payloads), a torn message no leader
// sent.
func TestFaultDuplicateIsCopiedAtSend(t *testing.T) {
	cases := []struct {
		name    string
		newResp func() any
		args    func() any
		send    func(tr raft.Transport, args, resp any) error
		mutate  func(args any)
	}{
		{"AppendEntries",
			func() any { return new(raft.AppendEntriesResponse) },
			func() any { return batch(5, 11, 4) },
			func(tr raft.Transport, args, resp any) error {
				return tr.AppendEntries("b", "b", args.(*raft.AppendEntriesRequest), resp.(*raft.AppendEntriesResponse))
			},
			func(args any) { refill(args.(*raft.AppendEntriesRequest)) }},
		{"AppendEntriesPipeline",
			func() any { return new(raft.AppendEntriesResponse) },
			func() any { return batch(5, 11, 4) },
			func(tr raft.Transport, args, resp any) error {
				p, err := tr.AppendEntriesPipeline("b", "b")
				if err != nil {
					return err
				}
				defer p.Close()
				_, err = p.AppendEntries(args.(*raft.AppendEntriesRequest), resp.(*raft.AppendEntriesResponse))
				return err
			},
			func(args any) { refill(args.(*raft.AppendEntriesRequest)) }},
		{"RequestVote",
			func() any { return new(raft.RequestVoteResponse) },
			func() any {
				r := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a:1")},
					Term: 7, LastLogIndex: 40, LastLogTerm: 6}
				//lint:ignore SA1019 raft v1.7.3 still fills the legacy field: a copy must hold it
				r.Candidate = []byte("a:1")
				return r
			},
			func(tr raft.Transport, args, resp any) error {
				return tr.RequestVote("b", "b", args.(*raft.RequestVoteRequest), resp.(*raft.RequestVoteResponse))
			},
			func(args any) {
				r := args.(*raft.RequestVoteRequest)
				r.Term, r.LastLogIndex, r.ID[0] = 8, 41, 'z'
				//lint:ignore SA1019 the legacy field is reused too
				r.Candidate[0] = 'z'
			}},
		{"RequestPreVote",
			func() any { return new(raft.RequestPreVoteResponse) },
			func() any {
				return &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a:1")},
					Term: 7, LastLogIndex: 40, LastLogTerm: 6}
			},
			func(tr raft.Transport, args, resp any) error {
				return tr.(raft.WithPreVote).RequestPreVote("b", "b", args.(*raft.RequestPreVoteRequest), resp.(*raft.RequestPreVoteResponse))
			},
			func(args any) { r := args.(*raft.RequestPreVoteRequest); r.Term, r.Addr[0] = 8, 'z' }},
		{"TimeoutNow",
			func() any { return new(raft.TimeoutNowResponse) },
			func() any {
				return &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a:1")}}
			},
			func(tr raft.Transport, args, resp any) error {
				return tr.TimeoutNow("b", "b", args.(*raft.TimeoutNowRequest), resp.(*raft.TimeoutNowResponse))
			},
			func(args any) { r := args.(*raft.TimeoutNowRequest); r.ID[0], r.Addr[0] = 'z', 'z' }},
	}
	for _, c := range cases {
		for _, gated := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/gated=%v", c.name, gated), func(t *testing.T) {
				resp := c.newResp()
				rec := &wireRecorder{orig: resp}
				if gated {
					rec.mutated = make(chan struct{})
				}
				n := New(1)
				n.SetDuplicate(1)
				tr := n.Wrap("a", recordingInner{rec, t})
				defer tr.(raft.WithClose).Close()

				args := c.args()
				want, err := json.Marshal(args)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.send(tr, args, resp); err != nil {
					t.Fatal(err)
				}
				c.mutate(args) // the caller reuses its request, as raft does
				if again, _ := json.Marshal(args); string(again) == string(want) {
					t.Fatal("mutate did not change the request")
				}
				if gated {
					close(rec.mutated)
				}
				waitFor(t, 10*time.Second, "the duplicate delivered", func() bool { _, d := rec.encoded(); return len(d) == 1 })
				calls, dups := rec.encoded()
				if len(calls) != 1 || calls[0] != string(want) {
					t.Fatalf("original delivered as\n%v\nwant\n%s", calls, want)
				}
				if dups[0] != string(want) {
					t.Fatalf("duplicate delivered as\n%s\nwant the request as sent\n%s", dups[0], want)
				}
				if st := n.Stats()[kindOf(c.name)]; st.Duplicated != 1 {
					t.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

func kindOf(name string) string {
	if name == "AppendEntriesPipeline" {
		return KindAppendEntries
	}
	return name
}
